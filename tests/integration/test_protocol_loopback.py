"""logdevice.protocol over a real TCP socket pair on 127.0.0.1: the asyncio glue
(``read_messages`` / ``write_message``) end to end, and a peer that closes mid-frame."""

import asyncio

import pytest

import logdevice.protocol as p
from logdevice.errors import E
from tests.unit.test_protocol import assert_same, records_msg


def test_loopback_hello_and_large_records():
    """A real TCP socket pair on 127.0.0.1: HELLO handshake, then a ~4 MB RECORDS frame
    echoed back, through read_messages / write_message."""
    big = records_msg(n=40_000, payload_size=100, seed=5)

    async def serve(reader, writer):
        try:
            async for msg in p.read_messages(reader):
                if isinstance(msg, p.Hello):
                    status, why = p.check_hello(msg, "loop")
                    p.write_message(writer, p.HelloReply(status=status, node_index=0,
                                                         message=why))
                else:
                    p.write_message(writer, msg)  # echo
                await writer.drain()
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            messages = p.read_messages(reader, p.FrameDecoder())
            p.write_message(writer, p.Hello(cluster="loop"))
            reply = await anext(messages)
            assert reply == p.HelloReply(status=E.OK, node_index=0)
            p.write_messages(writer, [big, p.Stop(read_stream_id=3)])
            await writer.drain()
            echoed = await anext(messages)
            stop = await anext(messages)
            writer.close()
            await writer.wait_closed()
            return echoed, stop

    echoed, stop = asyncio.run(asyncio.wait_for(main(), timeout=20))
    assert_same(big, echoed)
    assert stop == p.Stop(read_stream_id=3)


def test_peer_closing_mid_frame_is_reported():
    async def main():
        async def serve(reader, writer):
            writer.write(p.encode_frame(p.Stop(read_stream_id=1))[:7])
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                with pytest.raises(p.ProtocolError) as info:
                    async for _ in p.read_messages(reader):
                        pass
            finally:
                writer.close()
                await writer.wait_closed()
            return info.value.status

    assert asyncio.run(asyncio.wait_for(main(), timeout=10)) == E.PEER_CLOSED

"""The write path of a client: from ``append`` or a BufferedWriter to the sequencer.

- ``append_batcher``: single appends from user threads, gathered per log on the loop;
- ``append_slots``: how many records one log has in flight, against its limit;
- ``send_order``: one log's batches go on the wire in the order they were made;
- ``buffered_writer`` (``BufferedWriter``), ``batching`` (its sans-I/O bookkeeping),
  ``futures`` (one future per payload and per bulk call);
- ``payloads``: what an append accepts as a payload.
"""

"""The Appender: replicates one record (or one BufferedWriter blob) onto R storage nodes.

A sans-I/O state machine: events in (``start``, ``on_stored``, ``on_timeout``,
``on_node_down``, ``retry_now``, ``abort``), actions out (``SendStore``, ``AckAppend``,
``Reject``).  The sequencer owns one per LSN in its window; ``AppenderContext`` holds what
all appenders of a log share (copyset selector, node health, random source, timeouts).

Waves.  An attempt to store the record on one copyset is a *wave* (numbered from 1).  Every
member of the copyset gets a STORE carrying the wave number; a STORED only counts when it
names the current wave, so late answers to an abandoned wave are ignored.  A wave fails
when:

* its store timeout passes: members that stayed silent are graylisted.  The timeout is
  ``initial * 2**(wave-1)`` (capped; LogDevice uses 10 ms .. 1 min), or longer when the
  log has many bytes on their way to disk: each node of the nodeset has about
  ``unstored bytes * R / nodeset size`` of this log queued, and a wave waits at least
  ``STORE_SLACK`` times what that takes at the store rate the log's completed waves
  showed (``store_rate``: ``STORE_RATE_PRIOR`` until measured).  Without that, a
  burst of large blobs times out its first waves while the nodes are merely busy writing,
  and every second wave leaves an extra copy on disk.  When the timeout passes it is
  worked out again with the backlog of that moment (a node writes the stores that came
  later in the same group commits), and the wave waits on if that is later.  It is
  also never shorter than twice the slowest answer its members gave lately
  (``StoreLatency``, learnt from every log's waves): a node busy with many logs' STOREs,
  or pausing now and then, answers each late although no log has much on its way, and
  second waves to it would store copies again and add to its queue;
* a member answers with an error (NOSPC, OVERLOADED, DISABLED, ...): it is blacklisted;
  the next wave starts at once, since the failed node is now excluded;
* a member the wave still waits for is reported down.

The next wave draws a fresh copyset avoiding down, gray- and blacklisted nodes (and ends a
sticky block).  If graylisting alone makes selection impossible the graylist is cleared
(as LogDevice does); if it is still impossible the appender *waits*: no STORE goes out and
it retries when its timeout passes or ``retry_now`` is called (the sequencer does so when
a node comes back).  An appender that holds an LSN never gives up by itself: dropping an
LSN would leave a hole only epoch recovery can plug, so it retries until it succeeds or
the sequencer is deactivated (``abort``).

Appender stages.  LogDevice may send a wave to R + X nodes and then go through
replication (any R stored), sync-leader (the first ``num-sync-leaders`` nodes of the
copyset stored; only then may the record be released) and leader-redundancy stages,
deleting the extra copies.  We use X = 0: a copyset has exactly R nodes and the record is
replicated only when *all* of them answered STORED in the same wave.  So the leader (the
first node, the one single copy delivery ships from) always holds its copy before the ack
and before release, the sync-leader and leader-redundancy conditions hold trivially, and
no DELETEs are ever needed.  The cost is tail latency: one slow node delays the ack until
its wave times out.  Extras are a possible later optimisation.

The classes are compiled (``ldcore.appenders``); this module is where they belong.
"""

from __future__ import annotations

from ldcore.appenders import (
    RATE_ALPHA_DOWN,
    RATE_ALPHA_UP,
    RATE_SAMPLE_BYTES,
    STORE_RATE_FLOOR,
    STORE_RATE_PRIOR,
    STORE_SLACK,
    STORE_TIMEOUT,
    Appender,
    AppenderContext,
    AppenderState,
    StoreLatency,
)

__all__ = ["Appender", "AppenderContext", "AppenderState", "StoreLatency", "STORE_TIMEOUT",
           "STORE_SLACK", "STORE_RATE_PRIOR", "STORE_RATE_FLOOR", "RATE_SAMPLE_BYTES",
           "RATE_ALPHA_DOWN", "RATE_ALPHA_UP"]

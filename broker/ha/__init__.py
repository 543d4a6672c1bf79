"""Master-slave replication as RocketMQ 4.x's classic HA does it (docs/replication.md).

:mod:`~rocklet.broker.ha.wire` has the two frame kinds, :mod:`~rocklet.broker.ha.master`
the master's listener, its per-slave transfer and the SYNC_MASTER waits, and
:mod:`~rocklet.broker.ha.slave` the slave's client that appends what the master sends.
Who may follow a master: :mod:`~rocklet.broker.ha.listener` (address and TLS on the
accepted socket), :mod:`~rocklet.broker.ha.guard` (the allow-list, the master's half of
the handshake) and :mod:`~rocklet.broker.ha.handshake` (its bytes, the slave's half).
"""

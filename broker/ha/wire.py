"""The HA wire of RocketMQ 4.9 (``HAService``/``HAConnection``): no framing, no handshake.

Slave to master, the only thing ever sent: its max commitlog offset as one 8-byte
big-endian signed long. Master to slave: a 12-byte header, then ``size`` raw commitlog
bytes starting at commitlog offset ``offset``:

    ======  ====  ==============================================
    offset  size  field
    ======  ====  ==============================================
    0       8     physical offset of the first byte that follows
    8       4     size of the bytes that follow (0: a heartbeat)
    ======  ====  ==============================================
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["HEADER", "HEADER_SIZE", "REPORT", "REPORT_SIZE"]

#: Master to slave: physical offset, body size.
HEADER: Final = struct.Struct(">qi")
HEADER_SIZE: Final = HEADER.size
#: Slave to master: the slave's max commitlog offset.
REPORT: Final = struct.Struct(">q")
REPORT_SIZE: Final = REPORT.size

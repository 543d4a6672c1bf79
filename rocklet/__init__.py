"""The ``rocklet`` command line: name server, broker, standalone, admin and bench."""

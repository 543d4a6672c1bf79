"""The systems under test: Rocklet and its peers, one module each (server and client)."""

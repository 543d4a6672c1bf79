"""``python -m rocklet`` runs the command line."""

from rocklet.cli import main

raise SystemExit(main())

"""``python -m tesseradb.cli``: the same as the ``tessera`` command."""

from tesseradb.cli.app import main

main()

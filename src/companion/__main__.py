"""``python -m companion``: the command line of :mod:`companion.cli`."""

from companion.cli import main

if __name__ == "__main__":
    raise SystemExit(main())

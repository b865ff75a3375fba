"""``python -m trainscope export-parquet [--no-system] RUN... DEST``: the Parquet export for
Python users (the same as ``trainscope export parquet``; docs/export.md)."""
import sys


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "export-parquet":
        print("usage: python -m trainscope export-parquet [--no-system] RUN... DEST",
              file=sys.stderr)
        return 2
    from .parquet_export import main as export_main
    return export_main(args[1:])


if __name__ == "__main__":
    sys.exit(main())

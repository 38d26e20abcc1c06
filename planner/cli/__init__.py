"""The ``shardplan`` command line: a thin layer over the library (``main(argv) -> int``)."""

"""``python -m planner`` runs the ``shardplan`` command line."""

from planner.cli.main import console_main

if __name__ == "__main__":
    console_main()

"""``python -m matchsql``: the same as the ``matchsql`` command."""

import sys

from matchsql.cli import main

sys.exit(main())

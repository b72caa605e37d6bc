"""`python -m specviz ...`: see specviz.cli."""

from specviz.cli import main

raise SystemExit(main())

"""python -m softmax_lab: the softmax-lab command line (see softmax_lab.cli)."""

from .cli import main

raise SystemExit(main())

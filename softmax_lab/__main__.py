"""python -m softmax_lab: the softmax-lab command line (see softmax_lab.lab.cli)."""

from .lab.cli import main

raise SystemExit(main())

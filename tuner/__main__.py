"""``python -m tuner``: the ``tuner`` command (the same as ``python -m tuner.cli``)."""

from __future__ import annotations

import sys

from tuner.cli import main

sys.exit(main())

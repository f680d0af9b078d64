"""The Ray glue: the only package of tuner that imports Ray.

It turns a campaign spec into a Ray Tune run and keeps it honest while it runs: starting or
joining Ray and reading the cluster (``cluster``), the trial wrapper (``trial``), the Tune
run itself (``build``: the searcher of ``searcher``, a scheduler of ``scheduler``, the
callbacks of ``progress`` and ``snapshot``), the budget guard (``guard``, fed by ``nodes``),
failed trials (``failures``), and the driver that runs or resumes a campaign (``driver``).

Nothing here is public: the API is :mod:`tuner`. Modules import Ray at the top, so this
package's ``__init__`` imports none of them.
"""

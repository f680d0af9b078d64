"""The report's Pareto section from a multi-objective study built in memory (no Ray)."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from tuner.report._pareto import objectives_of, pareto_data, pareto_figure, pareto_table
from tuner.report._render import _png, plot_names, tables

OBJECTIVES = [("val_acc", "max"), ("param_count", "min")]


def _study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(directions=["maximize", "minimize"])
    for i, (acc, size) in enumerate([(0.95, 9000), (0.9, 2000), (0.7, 100), (0.6, 5000)]):
        trial = study.ask()
        trial.suggest_int("channels", 2, 32)
        trial.set_user_attr("tune_trial_id", f"t{i}")
        trial.set_user_attr("epochs", 3)
        study.tell(trial, [acc, size])
    pruned = study.ask()
    study.tell(pruned, state=TrialState.PRUNED)
    return study


def test_objectives_of_a_campaign_file() -> None:
    assert objectives_of({"metric": "val_acc", "mode": "max"}) == [("val_acc", "max")]
    both = {"metric": ["val_acc", "param_count"], "mode": ["max", "min"]}
    assert objectives_of(both) == OBJECTIVES


def test_pareto_data_table_and_plot() -> None:
    data = pareto_data(_study(), OBJECTIVES)
    assert [row["tune_trial_id"] for row in data["front"]] == ["t0", "t1", "t2"]
    assert [p["front"] for p in data["points"]] == [True, True, True, False]
    report = {"pareto": data}
    table = pareto_table(report)
    assert table[0] == ["#", "trial", "val_acc", "param_count", "epochs", "channels"]
    assert table[1][:4] == ["0", "t0", "0.95", "9000"]
    png = _png(pareto_figure(report))
    assert png.startswith(b"\x89PNG") and len(png) > 1000


def test_single_objective_reports_keep_their_plots() -> None:
    assert "pareto" not in plot_names({})
    assert plot_names({"pareto": {}})[0] == "pareto"
    bare = {"metric": "val_acc", "top": [], "best": None, "outcomes": {}, "outcome_reasons": {}}
    assert "pareto" not in tables({**bare, "cost": None})

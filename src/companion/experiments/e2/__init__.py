"""Experiment E2 (chapter 7), out-of-distribution scaling: ``data``, ``pipeline`` (the one
configuration, its presets, the one unit function, runner, loader and path rule), ``rule``
(pre-registered), ``verdicts`` (the rule on the readings and stored protocols; the one
verdict table) and ``study`` (the converged and decisive studies' registered analyses).
This package is the chapter's one face: it re-exports what chapter 7 uses."""

from companion.experiments.e2.data import (
    TEST_DISTRIBUTIONS,
    complement_power_head_accuracy,
    complement_power_rank,
    query_gaps,
)
from companion.experiments.e2.pipeline import (
    DECISIVE,
    E2_LIVE,
    E2_PROTOCOLS,
    E2_QUICK,
    HEADLINE,
    HEADLINES,
    PILOT_CHOICE,
    READING_QUICK,
    READINGS,
    READINGS_FULL,
    complete_sizes,
    e2_data,
    e2_live_result,
    e2_path,
    load_e2,
    load_e2_protocols,
    run_e2,
    study_complete,
    study_files,
)
from companion.experiments.e2.rule import (
    PAPER_TRANSITIONS,
    RULE_DENSE_EXACT,
    RULE_LOW,
    RULE_THRESHOLD,
    curve_rule,
)
from companion.experiments.e2.study import (
    decisive_summary,
    decisive_table,
    gap_table,
    pilot_table,
    plot_study,
    size_table,
    status_table,
    study_summary,
)
from companion.experiments.e2.verdicts import (
    accuracy_table,
    code_facts,
    curve_table,
    decomposition_table,
    e2_model_values,
    gaps_by_rank_table,
    plot_reading,
    summarise_e2,
    summary_line,
    verdict_table,
)

__all__ = ["TEST_DISTRIBUTIONS", "complement_power_head_accuracy",
           "complement_power_rank", "query_gaps", "DECISIVE", "E2_LIVE", "E2_PROTOCOLS",
           "E2_QUICK", "HEADLINE", "HEADLINES", "PILOT_CHOICE", "READING_QUICK",
           "READINGS", "READINGS_FULL", "complete_sizes", "e2_data", "e2_path",
           "e2_live_result", "load_e2", "load_e2_protocols", "run_e2", "study_complete",
           "study_files", "PAPER_TRANSITIONS", "RULE_DENSE_EXACT", "RULE_LOW",
           "RULE_THRESHOLD", "curve_rule", "decisive_summary", "decisive_table",
           "gap_table", "pilot_table", "plot_study", "size_table", "status_table",
           "study_summary", "accuracy_table", "code_facts", "curve_table",
           "decomposition_table", "e2_model_values", "gaps_by_rank_table",
           "plot_reading", "summarise_e2", "summary_line", "verdict_table"]

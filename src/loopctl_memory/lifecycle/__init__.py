"""The lifecycle of a memory after it is stored: consolidation, access, update and forgetting.

One concept a module: :mod:`.quality` (the quality score and the decay of
relevance), :mod:`.clustering` (near-duplicates and their merge),
:mod:`.consolidation` (the pass that decays, merges and prunes), :mod:`.rules`
(what counts as an access, what an update changes, what a forget deletes) and
:mod:`.arguments` (the checks of their arguments). The names below are the
ones the stores and callers use.
"""

from loopctl_memory.arguments import check_now
from loopctl_memory.lifecycle.clustering import (
    Cluster,
    cluster_duplicates,
    jaccard,
    merge_cluster,
    normalized_tokens,
    promote_highest_quality,
)
from loopctl_memory.lifecycle.consolidation import (
    ConsolidationConfig,
    ConsolidationPreview,
    ConsolidationResult,
    consolidate_entries,
    preview_entries,
)
from loopctl_memory.lifecycle.quality import category_decay_weight, decay_relevance, quality_score
from loopctl_memory.lifecycle.rules import (
    UNSET,
    ForgetRule,
    Unset,
    access_matches,
    apply_update,
    forget_rule,
    stamp_accessed,
    updater,
)

__all__ = [
    "UNSET",
    "Cluster",
    "ConsolidationConfig",
    "ConsolidationPreview",
    "ConsolidationResult",
    "ForgetRule",
    "Unset",
    "access_matches",
    "apply_update",
    "category_decay_weight",
    "check_now",
    "cluster_duplicates",
    "consolidate_entries",
    "decay_relevance",
    "forget_rule",
    "jaccard",
    "merge_cluster",
    "normalized_tokens",
    "preview_entries",
    "promote_highest_quality",
    "quality_score",
    "stamp_accessed",
    "updater",
]

"""Run configuration: owner files, dotted overrides, typed dataclasses and their checks.

``loader.load_config`` merges the owner chain (docs/contracts.md §owner-routing) and the CLI overrides into
frozen dataclasses; ``checks.check_semantics`` applies the docs/contracts.md §train step-5 rules; ``schema``
holds ``TrainingCfg`` and the fully resolved ``RunContext``. Errors are ``ConfigError``
(exit 2, nothing written).
"""

from trainer.config.errors import ConfigError
from trainer.config.schema import RunContext, SeedInfo, TrainingCfg

__all__ = ["ConfigError", "RunContext", "SeedInfo", "TrainingCfg"]

"""XGBoostJob's framework plugin."""

from trainyard.frameworks.xgboost.plugin import XGBoost

__all__ = ["XGBoost"]

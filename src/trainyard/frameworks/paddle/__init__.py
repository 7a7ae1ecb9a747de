"""PaddleJob's framework plugin."""

from trainyard.frameworks.paddle.plugin import Paddle

__all__ = ["Paddle"]

"""examples/trainjob: the YAML's inline script is train.py's ``train()``, shipped as the official SDK ships it."""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from pathlib import Path

import yaml

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "trainjob"


def test_the_manifests_script_is_train_py_and_safe_in_a_command() -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        from train import train  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(EXAMPLE))
    source = textwrap.dedent(inspect.getsource(train))
    # Bash expands nothing in a quoted here-document; Kubernetes still expands $(VAR) in commands, and
    # the SDK's here-document is unquoted: no dollar sign, backquote or backslash in the function.
    assert not re.search(r"[$`\\]", source)
    manifest = yaml.safe_load((EXAMPLE / "trainjob.yaml").read_text())
    assert manifest["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    trainer = manifest["spec"]["trainer"]
    assert trainer["numNodes"] == 2 and trainer["command"][:2] == ["bash", "-c"]
    assert trainer["command"][2] == f"cat > train.py << 'EOF'\n{source}\n\ntrain()\nEOF\ntorchrun train.py\n"

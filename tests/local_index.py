"""A real, tiny Python package index on disk, so ``packages_to_install`` is tested without the network.

``build`` writes a pure-Python wheel (a zip with the ``*.dist-info`` files pip checks) and a PEP 503
``simple/`` index that ``pip install --index-url file://...`` reads.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build(root: Path, name: str, version: str, module_source: str) -> str:
    """Write ``root/simple/<name>/`` with one wheel whose module ``<name>`` is ``module_source``; return its URL."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": module_source.encode(),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: trainyard-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(path, data) for path, data in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    normalized = re.sub(r"[-_.]+", "-", name).lower()  # PEP 503: pip asks for simple/<normalized>/
    project = root / "simple" / normalized
    project.mkdir(parents=True, exist_ok=True)
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(project / wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    (project / "index.html").write_text(f'<html><body><a href="{wheel}">{wheel}</a></body></html>\n')
    (root / "simple" / "index.html").write_text(f'<html><body><a href="{normalized}/">{name}</a></body></html>\n')
    return (root / "simple").as_uri()

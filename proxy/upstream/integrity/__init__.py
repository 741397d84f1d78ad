"""Rug-pull screening: each tool's fingerprint (`FingerprintStore`), and the `ToolGate` that withholds a changed
tool of a pinned server until it is approved (`ToolChange`).
"""

from proxy.upstream.integrity._fingerprints import FingerprintStore, fingerprint
from proxy.upstream.integrity._screening import ToolChange, ToolGate

__all__ = [
    "FingerprintStore",
    "ToolChange",
    "ToolGate",
    "fingerprint",
]

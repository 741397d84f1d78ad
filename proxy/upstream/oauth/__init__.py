"""OAuth for upstream servers: the user's consent (`login`, `Consent`) and where tokens are kept (`token_store`).
"""

from proxy.upstream.oauth._consent import LOGIN_POLL, Consent
from proxy.upstream.oauth._login import login
from proxy.upstream.oauth._provider import token_store

__all__ = [
    "LOGIN_POLL",
    "Consent",
    "login",
    "token_store",
]

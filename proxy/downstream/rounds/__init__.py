"""A downstream call's way back: the handshake era's `SessionChannel`, the 2026 era's input rounds
(`RoundTrips`, with sealed `RequestStates`), and the log messages each session takes (`SessionLogs`).
"""

from proxy.downstream.rounds._input_rounds import RoundTripChannel, RoundTrips
from proxy.downstream.rounds._request_state import RequestStates
from proxy.downstream.rounds._session_channel import SessionChannel
from proxy.downstream.rounds._session_logs import SessionLogs

__all__ = [
    "RequestStates",
    "RoundTripChannel",
    "RoundTrips",
    "SessionChannel",
    "SessionLogs",
]

"""Small HTTP helpers for the local stack: does a URL answer, and Airflow's REST API with a login.

Standard library only, so ``model-release status`` stays quick. The Airflow password is sent in a
request body and never logged or put in an error message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def answers(url: str, *, timeout: float = 2.0) -> int | None:
    """The HTTP status ``url`` answers with, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


class AirflowApi:
    """Airflow 3's REST API (``/api/v2``) as the stack's admin user.

    Args:
        url: the api-server's base URL.
        username: the simple auth manager's user.
        password: its password.
    """

    def __init__(self, url: str, username: str, password: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._login = {"username": username, "password": password}
        self._token: str | None = None

    def token(self) -> str:
        """A JWT for the API (what ``POST /auth/token`` returns), fetched once."""
        if self._token is None:
            self._token = str(self._request("POST", "/auth/token", self._login, auth=False)["access_token"])
        return self._token

    def get(self, path: str) -> Any:
        return self._request("GET", path)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._request("POST", path, body)

    def health(self) -> dict[str, Any]:
        """``/api/v2/monitor/health``: the status of the metadatabase, scheduler, dag-processor, triggerer."""
        return dict(self._request("GET", "/api/v2/monitor/health", auth=False))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, *, auth: bool = True) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            raise AirflowApiError(f"Airflow {method} {path} answered {exc.code}: {detail}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise AirflowApiError(f"Airflow at {self.url} did not answer {method} {path} ({exc})", None) from None


class AirflowApiError(Exception):
    """A request to Airflow's API failed; ``status`` is the HTTP status, None when nothing answered."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status

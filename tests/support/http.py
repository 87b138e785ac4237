"""POST to a local test server and return (status, body), HTTP errors included."""

import urllib.error
import urllib.request


def post(url: str, body: str | bytes, content_type: str = "application/json"):
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()

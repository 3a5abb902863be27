"""`kvdoctor serve`: the HTTP JSON API, its OpenAPI document, metrics, the paste page and the
Slack backend, as one Starlette app (optional extra `server`).

    from kvdoctor.server import ServerConfig, create_app
    app = create_app(ServerConfig(max_body=5 * 2**20, timeout_s=30))   # any ASGI server

Without SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN the Slack route is off (404).
"""

from kvdoctor.server.app import (
    KvdoctorApp,
    ServerConfig,
    config_from_env,
    create_app,
    create_app_from_env,
)

__all__ = ["KvdoctorApp", "ServerConfig", "config_from_env", "create_app", "create_app_from_env"]

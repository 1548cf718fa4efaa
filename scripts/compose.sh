#!/usr/bin/env bash
# docker-compose on docker-compose.yml, after the checks its own messages lack: Debian's
# docker-compose 1.29 answers a stopped daemon, or a socket this user may not open, with a Python
# traceback. `make up` and `make down` call it; arguments go to docker-compose unchanged.
#
#   scripts/compose.sh up --build -d
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if command -v docker-compose >/dev/null; then
  compose=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
else
  echo "compose: neither docker-compose nor docker compose is installed:" \
    "sudo apt-get install docker-compose docker.io" >&2
  exit 1
fi
if ! command -v docker >/dev/null; then
  echo "compose: the docker client is missing: sudo apt-get install docker.io" >&2
  exit 1
fi
if ! problem="$(docker info 2>&1 >/dev/null)"; then
  if grep -qi 'permission denied' <<<"$problem"; then
    echo "compose: this user may not use the Docker daemon's socket: run with sudo, or join" \
      "the docker group (sudo usermod -aG docker \"\$USER\", then log in again)" >&2
  else
    echo "compose: the Docker daemon is not running: start it (sudo systemctl start docker," \
      "or sudo dockerd & where there is no systemd), then try again" >&2
  fi
  exit 1
fi
exec "${compose[@]}" "$@"

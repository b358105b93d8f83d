#!/usr/bin/env bash
# Make sure a Docker engine answers: install docker.io and start dockerd when this machine has none.
# Idempotent; safe to run before every build or test.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-docker: no Docker engine and not root; install Docker and start it" >&2
    exit 1
  fi
  echo "ensure-docker: installing docker.io" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  echo "ensure-docker: starting dockerd" >&2
  mkdir -p /var/log
  nohup dockerd >/var/log/wpbench-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
fi
docker info >/dev/null 2>&1 || { echo "ensure-docker: dockerd did not come up; see /var/log/wpbench-dockerd.log" >&2; exit 1; }
echo "ensure-docker: engine $(docker version --format '{{.Server.Version}}') ready" >&2

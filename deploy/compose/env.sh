# shellcheck shell=bash
# Connection settings for the servers of docker-compose.yml, for clients on the host:
#   . deploy/compose/env.sh
_ebb_compose_dir="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
export KAFKA_BOOTSTRAP="localhost:${EBB_KAFKA_PORT:-9092}"
export EBB_KAFKA_BOOTSTRAP="${KAFKA_BOOTSTRAP}"
export DATABASE_URL="postgresql+asyncpg://ebb:ebb@127.0.0.1:${EBB_POSTGRES_PORT:-5432}/ebb"
export EBB_DATABASE_URL="${DATABASE_URL}"
export KUBECONFIG="${_ebb_compose_dir}/kubeconfig.yaml"
export EBB_KUBECONFIG="${KUBECONFIG}"
export MOTO_ENDPOINT="http://127.0.0.1:${EBB_MOTO_PORT:-5000}"
export AWS_ENDPOINT_URL="${MOTO_ENDPOINT}" AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
unset _ebb_compose_dir

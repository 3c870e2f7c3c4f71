"""deploy/kubernetes/, docker-compose.yml and the Dockerfile read as files against the code they run (no cluster,
no Docker engine): every setting, module, port and probe they name exists and lines up."""

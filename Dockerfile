# Builds the worker and starter binaries into a small image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# TAGS=scripted links the offline scripted model into the worker, for
# trying agentflow without a provider key (docker-compose.yml sets it);
# the production image leaves it out.
ARG TAGS=
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -tags "$TAGS" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/starter ./starter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/starter /usr/local/bin/
COPY catalog /catalog
ENV AGENTFLOW_HTTP_ADDR=0.0.0.0:9090
EXPOSE 9090
# The image has no shell or curl: the worker probes its own /healthz
# (AGENTFLOW_HTTP_ADDR) and exits 0 when it is healthy.
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/worker", "-healthcheck"]
ENTRYPOINT ["/usr/local/bin/worker"]

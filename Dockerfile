# Build: a static binary (no cgo), with the tiktoken ranks compiled in —
# scripts/build-static.sh, the same build CI tests.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TOLLGATE_VERSION=""
RUN scripts/build-static.sh /out/tollgate

# Run: distroless static, non-root, nothing but the binary and CA certificates.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tollgate /usr/local/bin/tollgate
USER nonroot:nonroot
# Reachable from outside the container: the demo (and a config without
# listen) serve on every interface.
ENV TOLLGATE_LISTEN=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/tollgate"]
CMD ["serve", "--config", "/etc/tollgate/tollgate.yaml"]

# Phalanx image: agent, coordinator and coordctl, static binaries on an
# empty base (no shell, no package manager), run as a non-root user.
# Build stage: the Go toolchain image only. README, Deploying, Containers.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse HEAD)" -t phalanx .
#
# Cross-builds with buildx (--platform linux/arm64) compile on the build
# machine's platform for the target's.
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# Set by BuildKit from --platform; the classic builder leaves them empty.
ARG TARGETOS
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-$(go env GOARCH)} go build -trimpath -buildvcs=false \
    -ldflags "-X github.com/phalanxload/phalanx/internal/version.Version=$VERSION -X github.com/phalanxload/phalanx/internal/version.Commit=$COMMIT" \
    -o /out/ ./cmd/agent ./cmd/coordinator ./cmd/coordctl

FROM scratch
# The roots that verify targets' certificates (TLS verification is on
# unless a plan says insecure).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/agent /out/coordinator /out/coordctl /usr/local/bin/
ENV PATH=/usr/local/bin
# coordinator gRPC, agent gRPC, gossip (TCP and UDP).
EXPOSE 7000/tcp 7070/tcp 7946/tcp 7946/udp
USER 65532:65532

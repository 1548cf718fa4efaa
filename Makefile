# On a fresh Debian bookworm machine:
#   make serve   install dependencies, build, make the demo model if missing, run the server
#   make test    install dependencies, build, run the whole test suite
#   make check   between edits: build, then the unit tests and one real-server smoke test
BUILD_DIR ?= build
MODEL_REPOSITORY ?= $(BUILD_DIR)/model-repository
SAMPLES_DIR ?= $(BUILD_DIR)/samples
GRPC_PORT ?= 50051
HTTP_PORT ?= 8000
METRICS_PORT ?= 9464
JOBS ?= $(shell nproc)
# One test more than cores: the suites that wait on servers and child processes leave cores idle
# that a further test's work fills.
TEST_JOBS ?= $(shell echo $$(( $(JOBS) + 1 )))

.PHONY: deps configure build model-repository serve test check sanitize bench-attention bench-backbone \
  bench-media bench-e2e bench-gpu bench-serving bench-protocols bench-segments bench-soak \
  bench-segmentation bench-streaming bench-timelines bench-training bench-precision-heads \
  bench-cameras up down clean

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target all benchmarks

# The default repository (scripts/build-model-repository.sh): a GRU, a softmax transformer that
# may run clustered attention, a causal-linear transformer and a segmentation GRU, made once (the
# models already there are kept).
model-repository: build
	@if [ ! -f $(MODEL_REPOSITORY)/demo-segments/1/model.json ]; then \
	  ./scripts/build-model-repository.sh $(BUILD_DIR)/bin $(MODEL_REPOSITORY) \
	    $(BUILD_DIR)/model-training $(SAMPLES_DIR); \
	fi

serve: model-repository
	@echo "From a second terminal, classify a sample video:"
	@echo "  $(BUILD_DIR)/bin/vidclf classify $(SAMPLES_DIR)/fade_in.mp4 --server localhost:$(GRPC_PORT)"
	@echo "or with curl:"
	@echo "  curl --data-binary @$(SAMPLES_DIR)/fade_in.mp4 'http://localhost:$(HTTP_PORT)/v2/models/demo/classify?top_k=3'"
	@echo "or drop one on the page: http://localhost:$(HTTP_PORT)/ (Ctrl-C here stops the server)"
	$(BUILD_DIR)/bin/vidclf-server --model-repository $(MODEL_REPOSITORY) \
	  --grpc-port $(GRPC_PORT) --http-port $(HTTP_PORT) --metrics-port $(METRICS_PORT)

# Everything but the benchmarks, which no test runs; then the ten slowest tests.
test: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)
	cd $(BUILD_DIR) && status=0 && \
	  { ctest --output-on-failure -j $(TEST_JOBS) --output-junit ctest-results.xml || status=$$?; } && \
	  /usr/bin/python3 $(CURDIR)/scripts/slowest-tests.py ctest-results.xml && exit $$status

# The inner loop between edits: the unit tests and one real server called by real clients
# (ctest labels unit and smoke), without installing anything or the default repository.
check:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD_DIR) -j $(JOBS)
	cd $(BUILD_DIR) && status=0 && \
	  { ctest --output-on-failure -j $(TEST_JOBS) -L '^(unit|smoke)$$' \
	      --output-junit ctest-check.xml || status=$$?; } && \
	  /usr/bin/python3 $(CURDIR)/scripts/slowest-tests.py ctest-check.xml && exit $$status

# media/ built with clang, ASan and UBSan (no LibTorch, no gRPC) in build-sanitize/: the media
# tests with leak checks, then libFuzzer on DecodeClip for FUZZ_SECONDS (60) and on the
# single-picture path for IMAGE_FUZZ_SECONDS (20) beside it, then on the HTTP door for
# HTTP_FUZZ_SECONDS (60) and the REST doors' JSON bodies for JSON_FUZZ_SECONDS (60). About 4
# minutes on two cores.
sanitize: deps
	JOBS=$(JOBS) ./scripts/media-sanitizer-check.sh

# Writes docs/results.md and its plots: the GRU, the transformer with each attention mechanism and
# the baselines on the synthetic benchmark, over three seeds, on 16-frame and long clips, and
# clustered attention substituted into a softmax model (about 45 minutes on two cores).
bench-training: build
	/usr/bin/python3 bench/training/run_comparison.py --train-binary $(BUILD_DIR)/bin/vidclf-train \
	  --work-dir $(BUILD_DIR)/training-bench --output docs/results.md

# Writes the "Timelines" section of docs/results.md: the heads of bench-training fitted again and
# served, and ClassifySegments over 10-minute synthetic timelines, scored by vidclf-train eval
# --segments (about 40 minutes on 2 cores).
bench-timelines: build
	/usr/bin/python3 bench/training/run_timelines.py --train-binary $(BUILD_DIR)/bin/vidclf-train \
	  --server-binary $(BUILD_DIR)/bin/vidclf-server --client-binary $(BUILD_DIR)/bin/vidclf \
	  --work-dir $(BUILD_DIR)/timelines-bench --output docs/results.md

# Writes the "Segmentation" section of docs/results.md: heads trained per frame on timelines,
# online and offline, over three seeds.
bench-segmentation: build
	/usr/bin/python3 bench/training/run_segmentation.py --train-binary $(BUILD_DIR)/bin/vidclf-train \
	  --work-dir $(BUILD_DIR)/segmentation-bench --output docs/results.md

# The backbone's bf16 and int8 against its fp32 on every head bench-timelines fitted (run that
# first): a section of docs/backbone-benchmark.md (about 7 minutes on 2 cores).
bench-precision-heads: build
	/usr/bin/python3 bench/training/precision_agreement.py \
	  --train-binary $(BUILD_DIR)/bin/vidclf-train --work $(BUILD_DIR)/timelines-bench/clips \
	  --output docs/backbone-benchmark.md

# Prints the ResNet18 throughput table of docs/backbone-benchmark.md (about a minute on the CPU).
bench-backbone: build
	$(BUILD_DIR)/bin/vidclf-backbone-bench --threads 2 --rounds 9

# Prints the tables of docs/media-benchmark.md (about 5 minutes: it encodes four 60-second videos,
# then times sparse sampling and all-frames decoding against the ffmpeg CLI).
bench-media: build
	$(BUILD_DIR)/bin/vidclf-media-bench --seconds 60 --rounds 5

# Writes docs/serving-benchmark.md: vidclf-server (batched and not) against a careful Python
# pipeline (PyAV + torchvision, the same weights) and the machine's limit, side by side, at
# concurrency 1 to 16 (about 20 minutes on two cores; not part of the tests).
bench-serving: model-repository
	/usr/bin/python3 bench/serving/run_benchmark.py --server-binary $(BUILD_DIR)/bin/vidclf-server \
	  --client-binary $(BUILD_DIR)/bin/vidclf --train-binary $(BUILD_DIR)/bin/vidclf-train \
	  --repository $(MODEL_REPOSITORY) --output docs/serving-benchmark.md \
	  --work-dir $(BUILD_DIR)/serving-bench --rounds 2 --requests-per-level 48

# Writes docs/protocol-benchmark.md: the same load through vidclf.v1's Classify and the Open
# Inference Protocol's ModelInfer, taking turns, and a 20 MB upload by gRPC and by HTTP (about 13
# minutes on two cores; not a test).
bench-protocols: model-repository
	/usr/bin/python3 bench/serving/protocols.py --server-binary $(BUILD_DIR)/bin/vidclf-server \
	  --client-binary $(BUILD_DIR)/bin/vidclf --repository $(MODEL_REPOSITORY) \
	  --output docs/protocol-benchmark.md --work-dir $(BUILD_DIR)/serving-bench

# Writes docs/segments-benchmark.md: one ClassifySegments call over a 10-minute 720p video against
# the decode limit and against the same windows sent as separate Classify calls, and the server's
# memory above idle (about 15 minutes on two cores; not a test).
bench-segments: model-repository
	/usr/bin/python3 bench/segments/run_benchmark.py --server-binary $(BUILD_DIR)/bin/vidclf-server \
	  --client-binary $(BUILD_DIR)/bin/vidclf --repository $(MODEL_REPOSITORY) \
	  --output docs/segments-benchmark.md --work-dir $(BUILD_DIR)/segments-bench

# Writes docs/performance.md and .png: one clip at a time on real files (720p and 1080p H.264 and
# HEVC, short and long GOPs), vidclf in-process and over gRPC with exact and fast decoding,
# against the Python pipeline and the machine's limits, then the accuracy cost of fast decoding on
# the synthetic benchmark's test split (about 10 minutes on two cores; not part of the tests).
bench-e2e: model-repository
	/usr/bin/python3 bench/e2e/run_benchmark.py --bin-dir $(BUILD_DIR)/bin \
	  --repository $(MODEL_REPOSITORY) --synthetic-data $(BUILD_DIR)/model-training/data \
	  --output docs/performance.md --work-dir $(BUILD_DIR)/e2e-bench

# Writes docs/soak-benchmark.md: one server for SOAK_MINUTES (30) under mixed calls at
# concurrency 4, two live streams restarting every 30 s and a burst of 100 concurrent 10 MB calls
# every 5 minutes; errors, the memory slope, latency early and late, the burst's refusals.
SOAK_MINUTES ?= 30
bench-soak: model-repository
	/usr/bin/python3 bench/soak/run_soak.py --server-binary $(BUILD_DIR)/bin/vidclf-server \
	  --repository $(MODEL_REPOSITORY) --samples $(SAMPLES_DIR) --output docs/soak-benchmark.md \
	  --work-dir $(BUILD_DIR)/soak --minutes $(SOAK_MINUTES)

# Writes docs/streaming-benchmark.md: how many real-time 25 fps camera feeds one server keeps
# up with, embedding every frame and every 4th; the streaming machinery against the backbone
# alone; memory per feed; a recurrent step against softmax (about 12 minutes; not a test).
bench-streaming: model-repository
	/usr/bin/python3 bench/streaming/run_benchmark.py --server $(BUILD_DIR)/bin/vidclf-server \
	  --client $(BUILD_DIR)/bin/vidclf --backbone-bench $(BUILD_DIR)/bin/vidclf-backbone-bench \
	  --step-bench $(BUILD_DIR)/bin/vidclf-step-bench --model-repository $(MODEL_REPOSITORY) \
	  --output docs/streaming-benchmark.md

# Writes docs/cameras-benchmark.md: registered RTSP cameras (gst-rtsp-server sending pre-encoded
# clips in a loop) against one server: cameras kept up with at 320x240 and 640x360 beside the
# decode-only limit, a restart with 24 cameras, memory per camera, and a soak with kills and
# freezes (CAMERAS_SECONDS per level, CAMERAS_SOAK_MINUTES; about 3 hours with the defaults).
CAMERAS_SECONDS ?= 300
CAMERAS_SOAK_MINUTES ?= 120
bench-cameras: model-repository
	/usr/bin/python3 bench/cameras/run_benchmark.py --server $(BUILD_DIR)/bin/vidclf-server \
	  --repository $(MODEL_REPOSITORY) --output docs/cameras-benchmark.md \
	  --seconds $(CAMERAS_SECONDS) --soak-minutes $(CAMERAS_SOAK_MINUTES)

# On a machine with a CUDA GPU and PyTorch 2.x, not this one's Debian LibTorch: builds the model-only
# tree against PyTorch's LibTorch, runs the model tests there and the GPU benchmarks, and writes
# docs/gpu-benchmark.md (about 6 minutes on one H100; Abseil, nlohmann-json and GoogleTest must
# be findable by CMake).
bench-gpu:
	bench/gpu/run.sh $(BUILD_DIR)/gpu-bench $(BUILD_DIR)/gpu
	python3 bench/gpu/report.py $(BUILD_DIR)/gpu-bench docs/gpu-benchmark.md

# Writes docs/attention-benchmark.md and .png (about 10 minutes on two cores; not part of the tests).
bench-attention: build
	$(BUILD_DIR)/bin/vidclf-attention-bench > $(BUILD_DIR)/attention-benchmark.csv \
	  2> $(BUILD_DIR)/attention-benchmark.log
	/usr/bin/python3 bench/attention/report.py $(BUILD_DIR)/attention-benchmark.csv \
	  $(BUILD_DIR)/attention-benchmark.log docs/attention-benchmark.md docs/attention-benchmark.png \
	  "make bench-attention"

# The compose stack (docker-compose.yml: vidclf, Prometheus, Grafana) built and started in the
# background, once the Docker daemon is checked; `make down` stops it. Offline: docs/deploy.md.
up:
	./scripts/compose.sh up --build -d

down:
	./scripts/compose.sh down

clean:
	rm -rf $(BUILD_DIR)

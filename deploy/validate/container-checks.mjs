// What every container vidclf deploys must hold, wherever its pod is declared (a Deployment's
// template, a Job's, a KServe ServingRuntime): no root, a read-only root filesystem with /tmp
// on an emptyDir, no privilege escalation or capabilities, requests and limits.

// `podSc`: the pod's securityContext; `volumes`: its volumes by name.
export function checkContainer(c, podSc, volumes, at, errors) {
  const sc = c.securityContext ?? {};
  if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) !== true) errors.push(`${at}: runAsNonRoot must be true`);
  if ((sc.runAsUser ?? podSc.runAsUser) === 0) errors.push(`${at}: runAsUser must not be 0`);
  if (sc.readOnlyRootFilesystem !== true) errors.push(`${at}: readOnlyRootFilesystem must be true`);
  if (sc.allowPrivilegeEscalation !== false) errors.push(`${at}: allowPrivilegeEscalation must be false`);
  if (!(sc.capabilities?.drop ?? []).includes("ALL")) errors.push(`${at}: capabilities must drop ALL`);
  const r = c.resources ?? {};
  for (const k of ["cpu", "memory"]) {
    if (r.requests?.[k] === undefined) errors.push(`${at}: resources.requests.${k} is not set`);
    if (r.limits?.[k] === undefined) errors.push(`${at}: resources.limits.${k} is not set`);
  }
  if (!c.image) errors.push(`${at}: no image`);
  const tmp = (c.volumeMounts ?? []).find((m) => m.mountPath === "/tmp");
  if (!tmp || !volumes.get(tmp.name)?.emptyDir) {
    errors.push(`${at}: /tmp must be an emptyDir mount (the root filesystem is read-only)`);
  }
  for (const m of c.volumeMounts ?? []) {
    if (!volumes.has(m.name)) errors.push(`${at}: volumeMount ${m.name} has no volume`);
  }
}

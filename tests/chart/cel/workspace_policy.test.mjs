// The chart's ValidatingAdmissionPolicy for the workspace namespace, evaluated for real: its
// CEL validations (rendered by chartrender from the values the console writes) run with
// @bufbuild/cel against the pod the controller itself builds (`uplink-agent workspace
// render-pod`), which every validation admits, and against hostile variants of it, each of
// which some validation refuses. Kubernetes presents JSON integers to CEL as int, objects as
// maps: so does toCel below. A validation that cannot be evaluated (a missing field) refuses,
// as failurePolicy: Fail makes it.
//
// Environment (ctest sets it): UPLINK_CHARTRENDER, UPLINK_AGENT, UPLINK_SOURCE_DIR.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import { isCelError, run } from "@bufbuild/cel";

const source = process.env.UPLINK_SOURCE_DIR;
const chartrender = process.env.UPLINK_CHARTRENDER;
const agent = process.env.UPLINK_AGENT;
if (!source || !chartrender || !agent) {
  throw new Error("UPLINK_SOURCE_DIR, UPLINK_CHARTRENDER and UPLINK_AGENT must be set (run through ctest)");
}

const image = "registry.example/uplink-workspace@sha256:" + "4".repeat(64);
const directory = mkdtempSync(join(tmpdir(), "workspace-policy-"));
after(() => rmSync(directory, { recursive: true, force: true }));

function execution(extra = {}) {
  return {
    execution: {
      enabled: true,
      cluster: { offerId: "off_0123456789abcdef", name: "prod-a" },
      workspaceImage: image,
      capacityGpus: 8,
      maxLifetimeSeconds: 86400,
      nodes: ["gpu-node-0001", "gpu-node-0002"],
      namespace: "uplink-workspaces",
      resourcesPerGpu: { cpuMillis: 8000, memoryBytes: 68719476736, ephemeralStorageBytes: 107374182400 },
      kubernetesApi: { cidrs: ["10.0.0.1/32"], port: 6443 },
      console: { cidrs: ["203.0.113.10/32"], port: 443 },
      credential: { existingSecret: "uplink-execution" },
      ...extra,
    },
  };
}

// The chart rendered with `values`: the policy's validations and the controller's config.
function renderChart(name, values) {
  const valuesFile = join(directory, `${name}.json`);
  writeFileSync(valuesFile, JSON.stringify(values));
  const output = execFileSync(chartrender, [
    "--kube-version", "v1.35.0", "--output", "json",
    "--set-string", "config.baseUrl=https://console.example.com",
    "--set-string", "token.existingSecret=agent-connection-token",
    "-f", valuesFile, join(source, "charts", "uplink-agent"),
  ], { encoding: "utf8" });
  const objects = JSON.parse(output).manifests.map((manifest) => manifest.object);
  const policy = objects.find((o) => o.kind === "ValidatingAdmissionPolicy");
  const configMap = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.endsWith("-execution"));
  const configFile = join(directory, `${name}-config.json`);
  writeFileSync(configFile, configMap.data["execution.json"]);
  return { policy, configFile, objects };
}

// The pod the controller would create for a 2-GPU reservation on the first approved node. The
// agent reads flags from UPLINK_* variables too, so it gets an environment of its own.
function controllerPod(configFile) {
  return JSON.parse(execFileSync(agent, ["workspace", "render-pod", "--config", configFile,
                                         "--node", "gpu-node-0001", "--gpus", "2"],
                                 { encoding: "utf8", env: { PATH: "/usr/bin:/bin" } }));
}

function toCel(value) {
  if (Array.isArray(value)) return value.map(toCel);
  if (value !== null && typeof value === "object") {
    return new Map(Object.entries(value).map(([key, inner]) => [key, toCel(inner)]));
  }
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  return value;
}

// The messages of the validations that refuse `pod` (false or not evaluable).
function refusals(policy, pod) {
  const object = toCel(pod);
  const refused = [];
  for (const { expression, message } of policy.spec.validations) {
    const result = run(expression, { object });
    if (isCelError(result) || result !== true) refused.push(message);
  }
  return refused;
}

const plain = renderChart("plain", execution());
const pod = controllerPod(plain.configFile);

function variant(change) {
  const copy = structuredClone(pod);
  change(copy, copy.spec, copy.spec.containers[0]);
  return copy;
}

describe("the workspace admission policy", () => {
  test("is the chart's: fails closed, matches pod creation in the workload namespace", () => {
    assert.equal(plain.policy.spec.failurePolicy, "Fail");
    assert.ok(plain.policy.spec.validations.length >= 10);
    // Every expression parses and evaluates against a real pod (none is a typo that errors).
    for (const { expression } of plain.policy.spec.validations) {
      const result = run(expression, { object: toCel(pod) });
      assert.ok(!isCelError(result), `${expression}: ${result}`);
    }
  });

  test("admits the controller's own pod", () => {
    assert.deepEqual(refusals(plain.policy, pod), []);
  });

  const hostile = {
    "another image": (o, s, c) => { c.image = "registry.example/uplink-workspace@sha256:" + "5".repeat(64); },
    "a tag instead of the digest": (o, s, c) => { c.image = "registry.example/uplink-workspace:latest"; },
    "a second container": (o, s, c) => { s.containers.push({ ...structuredClone(c), name: "sidecar", image: "busybox" }); },
    "an init container": (o, s, c) => { s.initContainers = [{ ...structuredClone(c), name: "init" }]; },
    "an ephemeral container": (o, s, c) => { s.ephemeralContainers = [{ name: "debug", image: "busybox" }]; },
    "root user": (o, s) => { s.securityContext.runAsUser = 0; },
    "root user in the container": (o, s, c) => { c.securityContext.runAsUser = 0; },
    "runAsNonRoot false": (o, s) => { s.securityContext.runAsNonRoot = false; },
    "another group": (o, s) => { s.securityContext.runAsGroup = 0; },
    "privileged": (o, s, c) => { c.securityContext.privileged = true; },
    "allowPrivilegeEscalation": (o, s, c) => { c.securityContext.allowPrivilegeEscalation = true; },
    "allowPrivilegeEscalation unset": (o, s, c) => { delete c.securityContext.allowPrivilegeEscalation; },
    "added capabilities": (o, s, c) => { c.securityContext.capabilities.add = ["NET_ADMIN"]; },
    "capabilities not dropped": (o, s, c) => { c.securityContext.capabilities.drop = ["NET_RAW"]; },
    "a writable root filesystem": (o, s, c) => { c.securityContext.readOnlyRootFilesystem = false; },
    "no container security context": (o, s, c) => { delete c.securityContext; },
    "missing seccomp": (o, s) => { delete s.securityContext.seccompProfile; },
    "seccomp unconfined": (o, s, c) => { c.securityContext.seccompProfile = { type: "Unconfined" }; },
    "unmasked /proc": (o, s, c) => { c.securityContext.procMount = "Unmasked"; },
    "sysctls": (o, s) => { s.securityContext.sysctls = [{ name: "net.ipv4.ip_forward", value: "1" }]; },
    "hostPath": (o, s, c) => {
      s.volumes.push({ name: "root", hostPath: { path: "/" } });
      c.volumeMounts.push({ name: "root", mountPath: "/host" });
    },
    "an emptyDir without a size": (o, s) => { s.volumes.push({ name: "big", emptyDir: {} }); },
    "an emptyDir in memory": (o, s) => { s.volumes.push({ name: "ram", emptyDir: { medium: "Memory", sizeLimit: "1Gi" } }); },
    "a Secret volume": (o, s) => { s.volumes.push({ name: "s", secret: { secretName: "uplink-execution" } }); },
    "a persistent volume claim": (o, s) => { s.volumes.push({ name: "p", persistentVolumeClaim: { claimName: "x" } }); },
    "a mounted service account token": (o, s) => {
      s.volumes.push({ name: "kube-api-access", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } });
    },
    "automountServiceAccountToken true": (o, s) => { s.automountServiceAccountToken = true; },
    "automountServiceAccountToken unset": (o, s) => { delete s.automountServiceAccountToken; },
    "service links": (o, s) => { s.enableServiceLinks = true; },
    "hostNetwork": (o, s) => { s.hostNetwork = true; },
    "hostPID": (o, s) => { s.hostPID = true; },
    "hostIPC": (o, s) => { s.hostIPC = true; },
    "a host port": (o, s, c) => { c.ports = [{ containerPort: 22, hostPort: 2222 }]; },
    "another node": (o, s) => { s.nodeName = "gpu-node-0099"; },
    "no node (the scheduler picks)": (o, s) => { delete s.nodeName; },
    "a nodeSelector elsewhere": (o, s) => { s.nodeSelector = { "kubernetes.io/hostname": "cpu-node-0001" }; },
    "node affinity": (o, s) => {
      s.affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [
        { matchFields: [{ key: "metadata.name", operator: "In", values: ["cpu-node-0001"] }] }] } } };
    },
    "envFrom a Secret": (o, s, c) => { c.envFrom = [{ secretRef: { name: "uplink-execution" } }]; },
    "env from a Secret key": (o, s, c) => {
      c.env = [{ name: "TOKEN", valueFrom: { secretKeyRef: { name: "uplink-execution", key: "credential" } } }];
    },
    "limits above requests": (o, s, c) => { c.resources.limits.cpu = "32000m"; },
    "no deadline": (o, s) => { delete s.activeDeadlineSeconds; },
    "a deadline past the maximum lifetime": (o, s) => { s.activeDeadlineSeconds = 86401; },
    "another priority class": (o, s) => { s.priorityClassName = "system-node-critical"; },
    "a runtime class not configured": (o, s) => { s.runtimeClassName = "runc-privileged"; },
  };

  for (const [name, change] of Object.entries(hostile)) {
    test(`refuses ${name}`, () => {
      const refused = refusals(plain.policy, variant(change));
      assert.ok(refused.length > 0, `${name} was admitted`);
    });
  }

  test("has at least 20 hostile variants", () => {
    assert.ok(Object.keys(hostile).length >= 20);
  });
});

describe("with a runtime class and user namespaces", () => {
  const isolated = renderChart("isolated", execution({ runtimeClassName: "nvidia", hostUsers: false }));
  const isolatedPod = controllerPod(isolated.configFile);

  test("admits the controller's pod, which sets both", () => {
    assert.equal(isolatedPod.spec.runtimeClassName, "nvidia");
    assert.equal(isolatedPod.spec.hostUsers, false);
    assert.deepEqual(refusals(isolated.policy, isolatedPod), []);
  });

  test("refuses a pod without them", () => {
    assert.ok(refusals(isolated.policy, pod).length >= 2);
    const shared = structuredClone(isolatedPod);
    shared.spec.hostUsers = true;
    assert.deepEqual(refusals(isolated.policy, shared), ["a user namespace of its own (hostUsers: false)"]);
  });
});

describe("what the controller creates", () => {
  test("validates against the Kubernetes schemas (kubernetes-models, kubernetes-types strict)", () => {
    const render = join(directory, "controller-pods.json");
    writeFileSync(render, JSON.stringify({ manifests: [
      { source: "uplink-agent workspace render-pod", object: pod },
      { source: "uplink-agent workspace render-pod (runtime class, hostUsers)",
        object: controllerPod(renderChart("isolated-2", execution({ runtimeClassName: "nvidia", hostUsers: false })).configFile) },
    ] }));
    const out = execFileSync(process.execPath, [join(source, "tests", "chart", "validate", "validate.mjs"), render],
                             { encoding: "utf8" });
    assert.match(out, /2 objects in 1 renders: all valid/);
  });
});

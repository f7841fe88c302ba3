import { expect } from 'chai';
import fs from 'fs';
import path from 'path';
import { CORE_SCHEMA, loadAll, mergeTag } from 'js-yaml';
import { Registry, collectDefaultMetrics } from 'prom-client';

const REPO_ROOT = path.resolve(__dirname, '../../..');
const DEPLOY = path.join(REPO_ROOT, 'deploy');
const K8S = path.join(DEPLOY, 'k8s');
const WORKER_KINDS = ['submissions', 'webhooks', 'crm', 'usage'] as const;
const ENTRY_POINTS = [
  'dist/src/main.js',
  'dist/src/api.js',
  'dist/src/cli/index.js',
  'dist/workers/all.js',
  ...WORKER_KINDS.map((kind) => `dist/workers/${kind}.js`),
];
// Manifests kept out of kustomization.yaml on purpose (see the comment in that file).
const NOT_IN_KUSTOMIZATION = ['kustomization.yaml', 'secret.example.yaml', 'keda-scaledobjects.yaml'];

const SERVICE_METRICS: ReadonlyArray<{ name: string; type: 'counter' | 'gauge' | 'histogram' }> = [
  { name: 'formservice_http_request_duration_seconds', type: 'histogram' },
  { name: 'formservice_queue_jobs', type: 'gauge' },
  { name: 'formservice_queue_oldest_waiting_age_seconds', type: 'gauge' },
  { name: 'formservice_queue_workers', type: 'gauge' },
  { name: 'formservice_job_duration_seconds', type: 'histogram' },
  { name: 'formservice_webhook_deliveries_total', type: 'counter' },
  { name: 'formservice_outbox_backlog', type: 'gauge' },
  { name: 'formservice_webhook_deliveries_throttled', type: 'gauge' },
  { name: 'formservice_rate_limit_rejections_total', type: 'counter' },
  { name: 'formservice_quota_rejections_total', type: 'counter' },
  { name: 'formservice_submissions_total', type: 'counter' },
  { name: 'formservice_payment_refunds_total', type: 'counter' },
  { name: 'formservice_replica_read_failures_total', type: 'counter' },
];

type Labels = Record<string, string>;

interface Probe {
  httpGet?: { path: string; port: string | number };
}

interface Container {
  name: string;
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string } }>;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  lifecycle?: { preStop?: unknown };
  resources?: { requests?: Labels; limits?: Labels };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
}

interface PodTemplate {
  metadata: { labels: Labels };
  spec: {
    containers: Container[];
    terminationGracePeriodSeconds?: number;
    securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  };
}

interface HpaMetric {
  type: string;
  resource?: { name: string };
  external?: { metric: { name: string; selector?: { matchLabels?: Labels } }; target: { type: string } };
}

interface Manifest {
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  data?: Labels;
  stringData?: Labels;
  resources?: string[];
  spec?: {
    template?: PodTemplate;
    // Service: the labels themselves; Deployment and PodDisruptionBudget: { matchLabels }.
    selector?: Record<string, unknown>;
    ports?: Array<{ targetPort: string | number }>;
    scaleTargetRef?: { kind?: string; name: string };
    metrics?: HpaMetric[];
    triggers?: Array<{ type: string; metadata: { query: string } }>;
  };
}

interface ComposeService {
  image?: string;
  command?: string[] | string;
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  deploy?: { replicas?: number };
}

interface GrafanaPanel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: Array<{ expr: string }>;
}

interface GrafanaDashboard {
  schemaVersion: number;
  templating: { list: Array<{ name: string; type: string; query: unknown; definition?: string }> };
  panels: GrafanaPanel[];
}

const AGGREGATION_MODIFIERS = /\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g;
const PROMQL_KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);

/** Metric names a PromQL expression selects: identifiers that are neither functions, keywords nor labels. */
function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(AGGREGATION_MODIFIERS, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w.])[A-Za-z_:][\w:]*/g)) {
    const isCall = bare.slice((match.index ?? 0) + match[0].length).trimStart().startsWith('(');
    if (!isCall && !PROMQL_KEYWORDS.has(match[0].toLowerCase())) names.add(match[0]);
  }
  return [...names];
}

function seriesNames(name: string, type: string): string[] {
  return type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name];
}

async function defaultProcessSeries(): Promise<string[]> {
  const register = new Registry();
  collectDefaultMetrics({ register, prefix: 'formservice_' });
  const metrics = await register.getMetricsAsJSON();
  return metrics.flatMap((metric) => seriesNames(metric.name, String(metric.type)));
}

function readDeployFile(relative: string): string {
  return fs.readFileSync(path.join(DEPLOY, relative), 'utf8');
}

function yamlFilesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return yamlFilesUnder(full);
    return /\.ya?ml$/.test(entry.name) ? [full] : [];
  });
}

function loadYaml(file: string): unknown[] {
  const schema = CORE_SCHEMA.withTags(mergeTag);
  return loadAll(fs.readFileSync(file, 'utf8'), { schema, filename: file }).filter((doc) => doc != null);
}

/** The manifests of one kustomization folder (the service's own by default; optional add-ons have folders of their own). */
function loadManifests(dir = K8S): Manifest[] {
  return fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).map((f) => path.join(dir, f)).flatMap((file) =>
    loadYaml(file).map((doc) => ({ ...(doc as Omit<Manifest, 'file'>), file: path.basename(file) })),
  );
}

function findManifest(manifests: Manifest[], kind: string, name: string): Manifest {
  const found = manifests.find((m) => m.kind === kind && m.metadata.name === name);
  if (!found) throw new Error(`no ${kind} named ${name} under deploy/k8s`);
  return found;
}

function podTemplate(workload: Manifest): PodTemplate {
  const template = workload.spec?.template;
  if (!template) throw new Error(`${workload.kind}/${workload.metadata.name} has no pod template`);
  return template;
}

function selectorLabels(m: Manifest): Labels {
  const selector = m.spec?.selector ?? {};
  return (m.kind === 'Service' ? selector : selector.matchLabels) as Labels;
}

function selects(selector: Labels, podLabels: Labels): boolean {
  return Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => podLabels[k] === v);
}

function containerPort(container: Container, port: string | number): number | undefined {
  return container.ports?.find((p) => p.name === port || p.containerPort === port)?.containerPort;
}

function commandOf(service: ComposeService): string {
  return Array.isArray(service.command) ? service.command.join(' ') : service.command ?? '';
}

interface DockerInstruction {
  op: string;
  args: string;
}

function dockerInstructions(text: string): DockerInstruction[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const [op, ...rest] = line.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

function lastStage(instructions: DockerInstruction[]): DockerInstruction[] {
  const lastFrom = instructions.map((i) => i.op).lastIndexOf('FROM');
  return instructions.slice(lastFrom);
}

describe('metricNamesIn', () => {
  const cases: Array<[string, string[]]> = [
    ['sum by (route) (rate(formservice_a_count{status=~"5.."}[$__rate_interval]))', ['formservice_a_count']],
    ['histogram_quantile(0.99, sum by (le, queue) (rate(b_bucket{queue=~"$queue"}[5m])))', ['b_bucket']],
    ['sum(rate(a_total[1m])) / sum(rate(b_total[1m]))', ['a_total', 'b_total']],
    ['a / on (instance) group_left (job) b offset 5m', ['a', 'b']],
    ['max(x{q="by (y)"}) > bool 1e3', ['x']],
    ['up == 1 and on () vector(1)', ['up']],
    ['sum(rate(c[5m])) by (route)', ['c']],
  ];
  for (const [expr, expected] of cases) {
    it(`finds ${JSON.stringify(expected)} in ${expr}`, () => {
      expect(metricNamesIn(expr)).to.have.members(expected).and.to.have.lengthOf(expected.length);
    });
  }
});

describe('deploy/', () => {
  describe('YAML files', () => {
    for (const file of yamlFilesUnder(DEPLOY)) {
      it(`${path.relative(REPO_ROOT, file)} parses into at least one document`, () => {
        expect(loadYaml(file)).to.not.be.empty;
      });
    }
  });

  describe('Kubernetes manifests', () => {
    const manifests = loadManifests();
    const config = findManifest(manifests, 'ConfigMap', 'form-service-config');
    const secret = findManifest(manifests, 'Secret', 'form-service-secrets');
    const deployments = manifests.filter((m) => m.kind === 'Deployment');
    const workloads = manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job');

    it('has one Deployment for the API and one per worker kind', () => {
      expect(deployments.map((d) => d.metadata.name)).to.have.members([
        'form-service-api',
        ...WORKER_KINDS.map((kind) => `form-service-worker-${kind}`),
      ]);
    });

    for (const workload of workloads) {
      const label = `${workload.kind} ${workload.metadata.name}`;
      const pod = podTemplate(workload);

      it(`${label} runs a known entry point`, () => {
        for (const container of pod.spec.containers) {
          expect(ENTRY_POINTS).to.include(container.args?.[0]);
        }
      });

      it(`${label} requests CPU and memory and caps memory`, () => {
        for (const container of pod.spec.containers) {
          expect(container.resources?.requests, container.name).to.include.keys('cpu', 'memory');
          expect(container.resources?.limits, container.name).to.include.keys('memory');
        }
      });

      it(`${label} runs as a non-root uid with a read-only root filesystem and no privilege escalation`, () => {
        expect(pod.spec.securityContext?.runAsNonRoot).to.equal(true);
        expect(pod.spec.securityContext?.runAsUser).to.be.a('number').above(0);
        for (const container of pod.spec.containers) {
          expect(container.securityContext?.readOnlyRootFilesystem, container.name).to.equal(true);
          expect(container.securityContext?.allowPrivilegeEscalation, container.name).to.equal(false);
          expect(container.securityContext?.capabilities?.drop, container.name).to.include('ALL');
        }
      });

      it(`${label} takes its environment from the shared ConfigMap and Secret`, () => {
        for (const container of pod.spec.containers) {
          const sources = container.envFrom ?? [];
          expect(sources.map((s) => s.configMapRef?.name)).to.include(config.metadata.name);
          expect(sources.map((s) => s.secretRef?.name)).to.include(secret.metadata.name);
        }
      });
    }

    for (const deployment of deployments) {
      const isApi = deployment.metadata.name === 'form-service-api';
      const probePort = Number(isApi ? config.data?.PORT : config.data?.METRICS_PORT);

      // The API's readiness depends on PostgreSQL only: it accepts submissions while Redis is down.
      const readinessPath = isApi ? '/readyz/api' : '/readyz';
      it(`${deployment.metadata.name} probes ${readinessPath} for readiness and /healthz for liveness on port ${probePort}`, () => {
        for (const container of podTemplate(deployment).spec.containers) {
          const { readinessProbe, livenessProbe } = container;
          expect(readinessProbe?.httpGet?.path).to.equal(readinessPath);
          expect(livenessProbe?.httpGet?.path).to.equal('/healthz');
          expect(containerPort(container, readinessProbe?.httpGet?.port ?? '')).to.equal(probePort);
          expect(containerPort(container, livenessProbe?.httpGet?.port ?? '')).to.equal(probePort);
        }
      });
    }

    describe('API', () => {
      const api = findManifest(manifests, 'Deployment', 'form-service-api');
      const pod = podTemplate(api);

      it('runs dist/src/api.js, drains for 40 s and sleeps before SIGTERM', () => {
        const [container] = pod.spec.containers;
        expect(container.args).to.deep.equal(['dist/src/api.js']);
        expect(pod.spec.terminationGracePeriodSeconds).to.equal(40);
        expect(container.lifecycle?.preStop).to.exist;
      });

      it('has a Service that selects its pods and targets a declared port', () => {
        const service = findManifest(manifests, 'Service', 'form-service-api');
        expect(selects(selectorLabels(service), pod.metadata.labels)).to.equal(true);
        for (const port of service.spec?.ports ?? []) {
          expect(containerPort(pod.spec.containers[0], port.targetPort)).to.equal(Number(config.data?.PORT));
        }
      });

      it('has an autoscaling/v2 HPA on CPU', () => {
        const hpa = findManifest(manifests, 'HorizontalPodAutoscaler', 'form-service-api');
        expect(hpa.apiVersion).to.equal('autoscaling/v2');
        expect(hpa.spec?.scaleTargetRef).to.include({ kind: 'Deployment', name: 'form-service-api' });
        expect(hpa.spec?.metrics?.map((m) => m.resource?.name)).to.include('cpu');
      });

      it('has a PodDisruptionBudget that selects its pods', () => {
        const pdb = findManifest(manifests, 'PodDisruptionBudget', 'form-service-api');
        expect(selects(selectorLabels(pdb), pod.metadata.labels)).to.equal(true);
      });
    });

    describe('workers', () => {
      for (const kind of WORKER_KINDS) {
        const name = `form-service-worker-${kind}`;

        it(`${kind}: the Deployment runs dist/workers/${kind}.js`, () => {
          const [container] = podTemplate(findManifest(manifests, 'Deployment', name)).spec.containers;
          expect(container.args).to.deep.equal([`dist/workers/${kind}.js`]);
        });

        it(`${kind}: a PodDisruptionBudget selects its pods`, () => {
          const pod = podTemplate(findManifest(manifests, 'Deployment', name));
          const pdb = findManifest(manifests, 'PodDisruptionBudget', name);
          expect(selects(selectorLabels(pdb), pod.metadata.labels)).to.equal(true);
        });

        it(`${kind}: an HPA scales it on waiting jobs of its queue`, () => {
          const hpa = findManifest(manifests, 'HorizontalPodAutoscaler', name);
          expect(hpa.apiVersion).to.equal('autoscaling/v2');
          expect(hpa.spec?.scaleTargetRef).to.include({ kind: 'Deployment', name });
          const external = hpa.spec?.metrics?.find((m) => m.type === 'External')?.external;
          expect(external?.metric.name).to.equal('formservice_queue_jobs');
          expect(external?.metric.selector?.matchLabels).to.deep.equal({ queue: kind, state: 'waiting' });
          expect(external?.target.type).to.equal('AverageValue');
        });

        it(`${kind}: a KEDA ScaledObject scales it on the same queue from Prometheus`, () => {
          const scaledObject = findManifest(manifests, 'ScaledObject', name);
          expect(scaledObject.spec?.scaleTargetRef?.name).to.equal(name);
          const [trigger] = scaledObject.spec?.triggers ?? [];
          expect(trigger.type).to.equal('prometheus');
          expect(metricNamesIn(trigger.metadata.query)).to.deep.equal(['formservice_queue_jobs']);
          expect(trigger.metadata.query).to.include(`queue="${kind}"`).and.include('state="waiting"');
        });
      }
    });

    it('has a migrate Job that runs dist/src/cli/index.js migrate once', () => {
      const job = findManifest(manifests, 'Job', 'form-service-migrate');
      const pod = podTemplate(job);
      expect(pod.spec.containers[0].args).to.deep.equal(['dist/src/cli/index.js', 'migrate']);
    });

    it('keeps only placeholders in the example Secret', () => {
      for (const [key, value] of Object.entries(secret.stringData ?? {})) {
        expect(value, key).to.include('REPLACE_ME');
      }
    });

    it('lists every manifest in kustomization.yaml, except the documented alternatives', () => {
      const kustomization = manifests.find((m) => m.kind === 'Kustomization');
      const listed = kustomization?.resources ?? [];
      const manifestFiles = fs.readdirSync(K8S).filter((f) => /\.ya?ml$/.test(f) && !NOT_IN_KUSTOMIZATION.includes(f));
      expect(listed).to.have.members(manifestFiles);
    });
  });

  describe('PgBouncer add-on (deploy/k8s/pgbouncer)', () => {
    const dir = path.join(K8S, 'pgbouncer');
    const manifests = loadManifests(dir);
    const deployment: any = findManifest(manifests, 'Deployment', 'pgbouncer');
    const pod: any = podTemplate(deployment);

    it('pools transactions, lets node-postgres connect and listens where its Service points', () => {
      const ini = (findManifest(manifests, 'ConfigMap', 'pgbouncer-config').data ?? {})['pgbouncer.ini'] as string;
      expect(ini).to.match(/^pool_mode = transaction$/m);
      expect(ini).to.match(/^ignore_startup_parameters = .*extra_float_digits.*statement_timeout/m);
      const service: any = findManifest(manifests, 'Service', 'pgbouncer');
      expect(service.spec.selector).to.deep.equal(deployment.spec.selector.matchLabels);
      expect(pod.spec.containers[0].ports.map((p: any) => p.name)).to.include(service.spec.ports[0].targetPort);
    });

    it('runs as a non-root uid with a read-only root filesystem and no privilege escalation', () => {
      expect(pod.spec.securityContext.runAsNonRoot).to.equal(true);
      for (const container of pod.spec.containers) {
        expect(container.securityContext).to.include({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
        expect(container.resources.limits?.memory).to.be.a('string');
      }
    });

    it('lists its manifest in its kustomization.yaml', () => {
      const kustomization = manifests.find((m) => m.kind === 'Kustomization');
      expect(kustomization?.resources).to.have.members(fs.readdirSync(dir).filter((f) => f !== 'kustomization.yaml'));
    });
  });

  describe('docker-compose.yml', () => {
    const [compose] = loadYaml(path.join(DEPLOY, 'docker-compose.yml')) as Array<{ services: Record<string, ComposeService> }>;
    const { services } = compose;

    it('runs Redis with AOF (fsync every second) and without eviction', () => {
      const command = commandOf(services.redis);
      expect(command).to.match(/--appendonly yes/).and.match(/--appendfsync everysec/);
      expect(command).to.match(/--maxmemory-policy noeviction/);
    });

    it('migrates once, then starts the API after the migration succeeded', () => {
      expect(commandOf(services.migrate)).to.equal('dist/src/cli/index.js migrate');
      expect(commandOf(services.api)).to.equal('dist/src/api.js');
      expect(services.api.depends_on?.migrate?.condition).to.equal('service_completed_successfully');
    });

    for (const kind of WORKER_KINDS) {
      it(`runs the ${kind} worker after the migration succeeded`, () => {
        const worker = services[`worker-${kind}`];
        expect(commandOf(worker)).to.equal(`dist/workers/${kind}.js`);
        expect(worker.depends_on?.migrate?.condition).to.equal('service_completed_successfully');
      });
    }

    it('runs two webhook workers', () => {
      expect(services['worker-webhooks'].deploy?.replicas).to.equal(2);
    });

    it('refuses to start without ENCRYPTION_KEY and ADMIN_TOKEN', () => {
      for (const role of ['migrate', 'api', ...WORKER_KINDS.map((kind) => `worker-${kind}`)]) {
        const env = services[role].environment ?? {};
        expect(env.ENCRYPTION_KEY, role).to.match(/^\$\{ENCRYPTION_KEY:\?.+\}$/);
        expect(env.ADMIN_TOKEN, role).to.match(/^\$\{ADMIN_TOKEN:\?.+\}$/);
      }
    });
  });

  describe('Dockerfile', () => {
    const instructions = dockerInstructions(readDeployFile('Dockerfile'));
    const runtime = lastStage(instructions);
    const argsOf = (op: string, stage = runtime) => stage.filter((i) => i.op === op).map((i) => i.args);

    it('builds in one node:24-bookworm-slim stage and runs in another', () => {
      const froms = argsOf('FROM', instructions);
      expect(froms).to.have.length.of.at.least(2);
      for (const from of froms) expect(from).to.match(/^node:24-bookworm-slim\b/);
      const runs = argsOf('RUN', instructions).join(' && ');
      expect(runs).to.include('npm ci').and.include('npm run build').and.include('npm prune --omit=dev');
    });

    it('copies only the runtime artefacts from the build stage', () => {
      const copied = argsOf('COPY').join(' ');
      for (const artefact of ['/app/dist', '/app/node_modules', '/app/package.json', '/app/openapi.yaml']) {
        expect(copied).to.include(artefact);
      }
    });

    it('runs as a non-root user', () => {
      const users = argsOf('USER');
      expect(users).to.have.lengthOf(1);
      expect(users[0]).to.not.match(/^(root|0)(:|$)/);
    });

    it('takes the role from the command, serves the API by default and checks /healthz', () => {
      expect(JSON.parse(argsOf('ENTRYPOINT')[0])).to.deep.equal(['node']);
      expect(JSON.parse(argsOf('CMD')[0])).to.deep.equal(['dist/src/api.js']);
      expect(argsOf('EXPOSE')).to.deep.equal(['3000']);
      expect(argsOf('HEALTHCHECK')[0]).to.include('/healthz');
    });
  });

  describe('Grafana dashboard', () => {
    const dashboard = JSON.parse(readDeployFile('grafana/form-service-dashboard.json')) as GrafanaDashboard;
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    const expressions = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
    const serviceSeries = SERVICE_METRICS.flatMap((m) => seriesNames(m.name, m.type));

    it('uses schemaVersion 39 and a Prometheus data source variable on every panel', () => {
      expect(dashboard.schemaVersion).to.equal(39);
      const variable = dashboard.templating.list.find((v) => v.type === 'datasource');
      expect(variable?.query).to.equal('prometheus');
      for (const panel of panels) {
        expect(panel.datasource, panel.title).to.deep.equal({ type: 'prometheus', uid: `\${${variable?.name}}` });
      }
    });

    it('gives every panel a unique id and at least one query', () => {
      const ids = dashboard.panels.map((p) => p.id);
      expect(new Set(ids).size).to.equal(ids.length);
      for (const panel of panels) expect(panel.targets, panel.title).to.not.be.empty;
    });

    it('queries only metrics the service exports (or up)', async () => {
      const known = new Set([...serviceSeries, ...(await defaultProcessSeries()), 'up']);
      const variableQueries = dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : []));
      for (const query of variableQueries) {
        const [, metric] = /^label_values\(\s*([\w:]+)\s*,/.exec(query) ?? [];
        expect(known.has(metric), query).to.equal(true);
      }
      for (const { panel, expr } of expressions) {
        const names = metricNamesIn(expr);
        expect(names, `${panel}: ${expr}`).to.not.be.empty;
        for (const name of names) expect(known.has(name), `${panel}: ${name}`).to.equal(true);
      }
    });

    it('charts every service metric and process CPU and memory', () => {
      const charted = new Set(expressions.flatMap(({ expr }) => metricNamesIn(expr)));
      for (const metric of SERVICE_METRICS) {
        expect(seriesNames(metric.name, metric.type).some((s) => charted.has(s)), metric.name).to.equal(true);
      }
      expect(charted).to.include('formservice_process_cpu_seconds_total');
      expect(charted).to.include('formservice_process_resident_memory_bytes');
    });
  });
});

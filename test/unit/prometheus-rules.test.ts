import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { dump, load } from 'js-yaml';
import { registry } from '../../src/lib/metrics';
import { QUEUE_NAMES } from '../../src/queues/catalogue';

const REPO_ROOT = path.resolve(__dirname, '../../..');
const PROMETHEUS_DIR = path.join(REPO_ROOT, 'deploy', 'prometheus');
const RULES = path.join(PROMETHEUS_DIR, 'alerts.yaml');
const RULE_TESTS = path.join(PROMETHEUS_DIR, 'alerts.test.yaml');
const CONFIG = path.join(PROMETHEUS_DIR, 'prometheus.yml');
const DASHBOARD = path.join(REPO_ROOT, 'deploy', 'grafana', 'form-service-dashboard.json');
const RUNBOOKS = path.join(REPO_ROOT, 'deploy', 'README.md');
const PROMTOOL = process.env.PROMTOOL ?? '/usr/bin/promtool';
/** Gauges every process samples from Redis or PostgreSQL: a sum counts them once per process. */
const SAMPLED_GAUGES = [
  'formservice_queue_jobs', 'formservice_queue_oldest_waiting_age_seconds', 'formservice_queue_workers', 'formservice_outbox_backlog',
  'formservice_webhook_deliveries_throttled',
];
const COMPONENTS = ['api', ...QUEUE_NAMES.map((queue) => `worker-${queue}`)];

const { renderMonitoringManifests, OUTPUT } = require(path.join(REPO_ROOT, 'scripts', 'monitoring-manifests.js'));

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile { groups: Array<{ name: string; rules: AlertRule[] }> }
interface RuleTests { tests: Array<{ name: string; alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }> }
interface ScrapeJob {
  job_name: string;
  static_configs?: Array<{ targets: string[]; labels?: Record<string, string> }>;
  kubernetes_sd_configs?: unknown[];
  relabel_configs?: Array<Record<string, unknown>>;
}
interface PrometheusConfig { rule_files: string[]; scrape_configs: ScrapeJob[] }

const readYaml = <T>(file: string) => load(fs.readFileSync(file, 'utf8')) as T;
const alertRules = () => readYaml<RuleFile>(RULES).groups.flatMap((g) => g.rules);

/** `promtool <args>`; rejects with its output when it exits non-zero. */
async function promtool(args: string[], cwd = PROMETHEUS_DIR): Promise<string> {
  try {
    const { stdout, stderr } = await promisify(execFile)(PROMTOOL, args, { cwd, timeout: 60_000 });
    return stdout + stderr;
  } catch (err) {
    const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${stdout}${stderr}`);
  }
}

/** GitHub's anchor of a Markdown heading. */
function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-');
}

describe('deploy/prometheus', () => {
  describe('alerts.yaml', () => {
    const rules = alertRules();
    const headings = new Set([...fs.readFileSync(RUNBOOKS, 'utf8').matchAll(/^#{2,4} (.+)$/gm)].map((m) => anchorOf(m[1])));

    it('covers every symptom the on-call operator is promised', () => {
      expect(rules.map((r) => r.alert)).to.include.members([
        'FormServiceApiErrorRatio', 'FormServiceApiLatencyHigh', 'FormServiceComponentDown', 'FormServiceProcessDown',
        'FormServiceQueueStalled', 'FormServiceQueueFallingBehind', 'FormServiceJobsFailing',
        'FormServiceWebhookDeliveriesFailing', 'FormServiceOutboxBacklogGrowing', 'FormServiceEventLoopLag',
        'FormServicePaymentRefundsMade',
      ]);
    });

    for (const rule of rules) {
      it(`${rule.alert} has a severity, a summary and a runbook entry in deploy/README.md`, () => {
        expect(rule.labels?.severity).to.be.oneOf(['page', 'ticket']);
        expect(rule.annotations?.summary).to.be.a('string').and.not.empty;
        const [file, anchor] = (rule.annotations?.runbook ?? '').split('#');
        expect(file).to.equal('deploy/README.md');
        expect(anchor).to.equal(rule.alert.toLowerCase());
        expect(headings.has(anchor), `no heading "${rule.alert}" in deploy/README.md`).to.equal(true);
      });
    }

    it('has a rule per component that fires when none of its targets is scraped at all (absent)', () => {
      const absent = rules.filter((r) => r.alert === 'FormServiceComponentAbsent');
      expect(absent.map((r) => r.labels?.component)).to.have.members(COMPONENTS);
      // A process running several components (src/main.ts, workers/all.ts) is one target labelled with each, comma-separated.
      for (const rule of absent) expect(rule.expr.trim()).to.equal(`absent(up{job="form-service", component=~"(.+,)?${rule.labels?.component}(,.+)?"})`);
      const fired = readYaml<RuleTests>(RULE_TESTS).tests
        .flatMap((t) => t.alert_rule_test ?? [])
        .filter((t) => t.alertname === 'FormServiceComponentAbsent')
        .flatMap((t) => (t.exp_alerts ?? []) as Array<{ exp_labels?: Record<string, string> }>)
        .map((a) => a.exp_labels?.component);
      expect(new Set(fired), 'alerts.test.yaml fires FormServiceComponentAbsent for every component').to.have.all.keys(...COMPONENTS);
    });

    it('webhook failures alert on a ratio of attempts, not on a count', () => {
      const rule = rules.find((r) => r.alert === 'FormServiceWebhookDeliveriesFailing')!;
      expect(rule.expr).to.match(/formservice_webhook_deliveries_total\{result!="succeeded"\}\[\w+\]\)\)\s*\/\s*sum\(rate\(formservice_webhook_deliveries_total\[/);
    });

    it('has unit tests that see every alert fire and stay silent', () => {
      const tests = readYaml<RuleTests>(RULE_TESTS).tests.flatMap((t) => t.alert_rule_test ?? []);
      for (const { alert } of rules) {
        const own = tests.filter((t) => t.alertname === alert);
        expect(own.some((t) => (t.exp_alerts ?? []).length > 0), `${alert} never fires in alerts.test.yaml`).to.equal(true);
        expect(own.some((t) => (t.exp_alerts ?? []).length === 0), `${alert} is never checked silent in alerts.test.yaml`).to.equal(true);
      }
    });
  });

  describe('sampled gauges', () => {
    it('lists every gauge src/lib/metrics.ts declares as sampled', async () => {
      const sampled = (await registry.getMetricsAsJSON())
        .filter((m) => String(m.type) === 'gauge' && /\(sampled/.test(m.help))
        .map((m) => m.name);
      expect(sampled).to.have.members(SAMPLED_GAUGES);
    });

    const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const expressions = [
      ...alertRules().map((r) => r.expr),
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ];
    for (const gauge of SAMPLED_GAUGES) {
      it(`${gauge} is only ever aggregated with max in the alerts and the dashboard`, () => {
        const uses = expressions.filter((e) => e.includes(gauge));
        expect(uses, gauge).to.not.be.empty;
        for (const expr of uses) {
          const aggregation = new RegExp(`(\\w+)\\s*(?:(?:by|without)\\s*\\([^)]*\\)\\s*)?\\(\\s*${gauge}\\b`, 'g');
          const aggregations = [...expr.matchAll(aggregation)].map((m) => m[1]);
          expect(aggregations, expr).to.not.be.empty;
          expect(aggregations.every((a) => a === 'max'), expr).to.equal(true);
        }
      });
    }
  });

  describe('prometheus.yml', () => {
    const config = readYaml<PrometheusConfig>(CONFIG);
    const staticJob = config.scrape_configs.find((j) => j.job_name === 'form-service')!;
    const podsJob = config.scrape_configs.find((j) => j.kubernetes_sd_configs)!;

    it('loads alerts.yaml', () => {
      expect(config.rule_files).to.deep.equal(['alerts.yaml']);
    });

    it('has static targets for the API and each worker kind, labelled by component', () => {
      const labelled = (staticJob.static_configs ?? []).map((c) => c.labels?.component);
      const discovered = (staticJob as { dns_sd_configs?: Array<{ names: string[] }> }).dns_sd_configs?.flatMap((c) => c.names) ?? [];
      expect([...labelled, ...discovered]).to.have.members(COMPONENTS);
    });

    it('finds pods by their prometheus.io annotations and labels them job="form-service" and by component', () => {
      const rules = podsJob.relabel_configs ?? [];
      expect(rules).to.deep.include({ source_labels: ['__meta_kubernetes_pod_annotation_prometheus_io_scrape'], regex: 'true', action: 'keep' });
      expect(rules.map((r) => r.source_labels).flat()).to.include.members([
        '__meta_kubernetes_pod_annotation_prometheus_io_port', '__meta_kubernetes_pod_annotation_prometheus_io_path',
      ]);
      expect(rules).to.deep.include({ target_label: 'job', replacement: 'form-service' });
      expect(rules).to.deep.include({ source_labels: ['__meta_kubernetes_pod_label_app_kubernetes_io_component'], target_label: 'component' });
    });
  });

  describe('deploy/k8s/monitoring.yaml', () => {
    it('is what scripts/monitoring-manifests.js renders from alerts.yaml and prometheus.yml (run it after changing them)', () => {
      expect(fs.readFileSync(OUTPUT, 'utf8')).to.equal(renderMonitoringManifests());
    });

    it('ships the rule groups of alerts.yaml unchanged as a PrometheusRule', () => {
      const docs = fs.readFileSync(OUTPUT, 'utf8').split(/^---$/m).map((d) => load(d) as { kind: string; spec: unknown });
      expect(docs.find((d) => d.kind === 'PrometheusRule')?.spec).to.deep.equal(readYaml(RULES));
    });
  });

  describe('promtool', function () {
    this.timeout(60_000);
    // No silent skip: rules nobody checked would pass as checked. .ci/run installs Debian's prometheus.
    it(`finds promtool at ${PROMTOOL} (Debian package prometheus; .ci/run installs it)`, () => {
      expect(fs.existsSync(PROMTOOL), `promtool not found at ${PROMTOOL}: apt-get install prometheus, or set PROMTOOL`).to.equal(true);
    });

    it('check rules accepts alerts.yaml', async () => {
      expect(await promtool(['check', 'rules', RULES])).to.match(/SUCCESS: \d+ rules found/);
    });

    it('test rules passes every unit test of alerts.test.yaml', async () => {
      expect(await promtool(['test', 'rules', RULE_TESTS])).to.include('SUCCESS');
    });

    // Debian builds Prometheus without Kubernetes discovery, so its promtool checks the rest.
    it('check config accepts prometheus.yml (without the Kubernetes job) and the rules it loads', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-promcheck-'));
      try {
        const config = readYaml<PrometheusConfig>(CONFIG);
        config.scrape_configs = config.scrape_configs.filter((j) => !j.kubernetes_sd_configs);
        fs.writeFileSync(path.join(dir, 'prometheus.yml'), dump(config));
        fs.copyFileSync(RULES, path.join(dir, 'alerts.yaml'));
        expect(await promtool(['check', 'config', 'prometheus.yml'], dir)).to.include('valid prometheus config file syntax');
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

// The user's journey through the browser alone: log in, schedule a quick campaign with the
// form, watch it run (live progress, no reload), inspect raw repetitions, compare platforms.
// Env: VB_URL, VB_TOKEN, VB_SHOTS (screenshot directory), VB_TAG (file name prefix).
import { launch } from "./browser.mjs";
import { mkdirSync } from "node:fs";

const URL = process.env.VB_URL, TOKEN = process.env.VB_TOKEN;
const SHOTS = process.env.VB_SHOTS, TAG = process.env.VB_TAG || "e2e";
mkdirSync(SHOTS, { recursive: true });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

const { context, close } = await launch();
const page = context.pages()[0] || await context.newPage();
const problems = [];
let refusalExpected = false; // the browser logs the deliberate 401/403 answers as console errors
page.on("console", (m) => {
  if (m.type() !== "error") return;
  if (refusalExpected && /status of 40[13]/.test(m.text())) return;
  problems.push(`console: ${m.text()}`);
});
page.on("pageerror", (e) => problems.push(`page error: ${e}`));
page.on("request", (r) => { if (!r.url().startsWith(URL) && !r.url().startsWith("data:")) problems.push(`external request: ${r.url()}`); });
const shot = async (name) => page.screenshot({ path: `${SHOTS}/${TAG}-${name}.png`, fullPage: true });

try {
  // dashboard, then log in with the token
  await page.goto(URL + "/");
  check(await page.locator("h1", { hasText: "Dashboard" }).isVisible(), "dashboard shows");
  await page.click("#login-link");
  await page.fill("#token", "wrong-token");
  refusalExpected = true;
  await page.click("#login-form button[type=submit]");
  check(await page.locator("#login-error").isVisible(), "a wrong token is refused");
  refusalExpected = false;
  await page.fill("#token", TOKEN);
  await page.click("#login-form button[type=submit]");
  await page.waitForURL(URL + "/");
  check(await page.locator("text=signed in").isVisible(), "logged in");
  await shot("01-dashboard");

  // schedule the quick campaign through the form
  await page.click("text=Schedule");
  await page.waitForURL(URL + "/schedule");
  for (const id of ["#f-adaptive", "#f-adaptive-until", "#f-adaptive-max_minutes", "#f-probe-pressure",
                    "#f-bench-profile", "#f-release"]) {
    check(await page.locator(id).count() === 1, `schedule form has ${id}`);
  }
  const memory = await page.locator('tr.prow[data-type="qemu"] input[name$=".opt.memory"]').getAttribute("placeholder");
  check(memory === "1 GiB", `sizes in binary units (qemu memory ${memory})`);
  await page.click("#quick-preset");
  await page.waitForURL(URL + "/schedule?preset=quick");
  check(await page.locator('tr.brow[data-type="openssl"] input[type=checkbox]').isChecked() &&
        await page.locator("#f-adaptive").isChecked(), "the quick comparison fills the form");
  await shot("02a-quick-preset");
  await page.goto(URL + "/schedule");
  await page.fill("#f-name", "e2e-quick");
  await page.fill("#f-repetitions", "2");
  await page.fill("#f-warmups", "0");
  await page.check('tr.prow[data-type="native"] input[type=checkbox]');
  await page.check('tr.prow[data-type="runc"] input[type=checkbox]');
  await page.check('tr.brow[data-type="sysbench-cpu"] input[type=checkbox]');
  await page.fill('tr.brow[data-type="sysbench-cpu"] input[name$=".param.time"]', "1");
  await shot("02-schedule");
  await page.click("#schedule-submit");
  await page.waitForURL(/\/runs\/[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$/);
  const runUrl = page.url();
  check(await page.locator("#progress").isVisible(), `run page ${runUrl.split("/").pop()} shows progress`);

  // watch it: the page updates itself (no reload) while the worker measures
  const marker = await page.evaluate(() => { window.__notReloaded = true; return true; });
  await page.waitForFunction(() => document.querySelector("#progress")?.dataset.status === "running",
    null, { timeout: 300000 });
  await page.waitForFunction(() => Number(document.querySelector("#progress-bar")?.value) >= 1,
    null, { timeout: 300000 });
  check(marker && await page.evaluate(() => window.__notReloaded === true), "progress advanced without a reload");
  await page.waitForFunction(() => /ETA \d/.test(document.querySelector('[data-field="eta"]')?.textContent || "") ||
    document.querySelector("#progress")?.dataset.status !== "running", null, { timeout: 300000 });
  const eta = (await page.locator('[data-field="eta"]').textContent()).trim();
  check(/^ETA \d+:\d\d/.test(eta), `ETA shown while running: "${eta}"`);
  const step = await page.locator('[data-field="step"]').textContent();
  check(/round|starting|stopping|preparing/.test(step), `live step shown: "${step.trim()}"`);
  await shot("03-running");
  await page.waitForSelector("#verify-link", { timeout: 300000 });
  await page.waitForFunction(() => document.querySelector("#progress")?.dataset.status === "finished",
    null, { timeout: 60000 });
  check((await page.locator('[data-field="counts"]').textContent()).trim() === "8/8", "all 8 executions done");
  check(await page.locator("table.results").count() >= 2, "results tables shown");
  check(await page.locator("h3#headline").isVisible() && await page.locator("h3#warnings").isVisible(),
        "headline and warnings shown");
  check(await page.locator(".chart-box svg").count() >= 1, "charts drawn on the run page");
  const yamlText = await page.locator("#campaign-yaml").textContent();
  check(yamlText.includes("name: e2e-quick") && !yamlText.includes("{'"), "campaign shown as YAML");
  await shot("04-finished");

  // verify: every repetition, flags, raw output
  await page.click("#verify-link");
  await page.waitForSelector("#trend-chart svg");
  const points = await page.locator("#trend-chart svg circle").count();
  check(points >= 4, `trend chart has ${points} points`);
  check(await page.locator("section.platform").count() === 2, "one table per platform");
  await shot("05-verify");
  await page.locator("a.raw").first().click();
  await page.waitForSelector("#stdout");
  const stdout = await page.locator("#stdout").textContent();
  check(/events per second/.test(stdout), "raw sysbench output shown");
  await shot("06-raw-output");

  // compare
  await page.goto(runUrl);
  await page.click("#compare-link");
  await page.waitForSelector("#results-table");
  check(await page.locator("#category-table").isVisible(), "category table shown");
  check(await page.locator("#charts svg").count() >= 2, "CI bar charts drawn");
  const runcRow = await page.locator("#results-table tr", { hasText: "events_per_second" }).filter({ hasText: "runc" }).count();
  check(runcRow === 1, "runc relative to native listed");
  await shot("07-compare");

  // the dashboard now shows the result
  await page.goto(URL + "/");
  check(await page.locator(".card.result", { hasText: "e2e-quick" }).count() === 1, "dashboard lists the result");
  await shot("08-dashboard-after");

  // run it again: a new queued run of the same campaign (cancelled here: one measured run is enough)
  await page.goto(runUrl);
  await page.click("#run-again");
  await page.waitForURL((u) => /\/runs\/[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$/.test(u.toString()) && u.toString() !== runUrl);
  check((await page.locator("#campaign-yaml").textContent()) === yamlText, "run again queued the same campaign");
  await shot("09-run-again");
  page.once("dialog", (d) => d.accept());
  await page.click("#cancel");
  await page.waitForLoadState();

  // logged out, nothing can be changed
  await page.click("header form button.link");
  await page.goto(URL + "/schedule");
  check(await page.locator("#need-login").isVisible(), "logged out: schedule asks for a login");
  await page.check('tr.brow[data-type="sysbench-cpu"] input[type=checkbox]');
  await page.fill("#f-name", "not-allowed");
  refusalExpected = true;
  await page.click("#schedule-submit");
  check((await page.locator("#error-detail").textContent()).includes("log in"), "logged out: scheduling refused");
  refusalExpected = false;

  check(problems.length === 0, `no console errors, CSP violations or external requests${problems.length ? ": " + problems.join("; ") : ""}`);
} catch (err) {
  await shot("failure").catch(() => {});
  console.error(err.stack || String(err));
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await close();
}

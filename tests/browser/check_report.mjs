// Opens a virtbench HTML report in the system's headless Chromium through the DevTools
// protocol (playwright-core; it never downloads a browser) and prints what it saw as JSON.
// Network is off and every non-file request is blocked and recorded, so a report that
// needs the internet shows up as requests and errors instead of rendering silently.
//
//   node check_report.mjs REPORT.html [CHROMIUM]
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const file = resolve(process.argv[2]);
const executablePath = process.argv[3] || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "vb-chromium-"));
const result = { consoleErrors: [], pageErrors: [], externalRequests: [], figures: 0, drawn: 0 };
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  offline: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"],
});
try {
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith("file:") || url.startsWith("data:") || url.startsWith("blob:")) return route.continue();
    result.externalRequests.push(url);
    return route.abort();
  });
  const page = context.pages()[0] || (await context.newPage());
  page.on("console", (m) => { if (m.type() === "error") result.consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => result.pageErrors.push(String(e)));
  page.on("requestfailed", (r) => {
    const url = r.url();
    if (!url.startsWith("file:") && !result.externalRequests.includes(url)) result.externalRequests.push(url);
  });
  await page.goto(pathToFileURL(file).href, { waitUntil: "load", timeout: 120000 });
  await page.waitForSelector("body[data-ready='1']", { timeout: 60000 });
  // Lazy drawing: only figures near the viewport are drawn on load.
  result.drawnOnLoad = await page.$$eval(".fig .main-svg", (els) => els.length);
  result.figures = await page.evaluate(() => window.vbDrawAll());
  await page.waitForFunction(
    () => [...document.querySelectorAll(".fig")].every((el) => el.querySelector(".main-svg")),
    null, { timeout: 120000 });
  result.drawn = await page.$$eval(".fig", (els) => els.filter((el) => el.querySelector(".main-svg")).length);
  result.traces = await page.$$eval(".fig", (els) => els.reduce((n, el) => n + (el.data ? el.data.length : 0), 0));
  result.logAxes = await page.$$eval(".fig", (els) => els.filter((el) => el.layout && el.layout.xaxis
    && el.layout.xaxis.type === "log").length);
  result.title = await page.title();
  result.tables = await page.$$eval("table", (els) => els.length);
  // The first main table and its search box: typing hides every row that does not match.
  const mainId = await page.$eval("table.main", (t) => t.id).catch(() => null);
  const visibleRows = () => page.$$eval(`#${mainId} tbody tr`, (els) => els.filter((e) => e.style.display !== "none").length);
  const rowsBefore = mainId ? await visibleRows() : 0;
  const filter = mainId ? await page.$(`input.filter[data-table='${mainId}']`) : null;
  if (filter) {
    await filter.fill("zzz-no-such-row");
    result.filterHidesRows = rowsBefore > 0 && (await visibleRows()) === 0;
  }
  result.mainRows = rowsBefore;
  result.text = (await page.textContent("body")).slice(0, 100000);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(result));

// Screenshots of pages, for looking at them: node shoot.mjs OUTDIR URL...
import { launch } from "./browser.mjs";
import { mkdirSync } from "node:fs";

const [outdir, ...urls] = process.argv.slice(2);
mkdirSync(outdir, { recursive: true });
const { context, close } = await launch();
const page = context.pages()[0] || await context.newPage();
const errors = [];
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
page.on("pageerror", (e) => errors.push(String(e)));
let i = 0;
for (const url of urls) {
  await page.goto(url, { waitUntil: "load" });
  const file = `${outdir}/${String(++i).padStart(2, "0")}.png`;
  await page.screenshot({ path: file, fullPage: true });
  console.log(file, url);
}
if (errors.length) console.log("console errors:", errors.join("\n"));
await close();

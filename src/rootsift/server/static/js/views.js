// Each view renders into `main` from the URL's state.
import { changes } from "./views/changes.js";
import { compare } from "./views/compare.js";
import { datasetsView } from "./views/datasets.js";
import { heatmapView } from "./views/heatmap.js";
import { investigate } from "./views/investigate.js";
import { profiles } from "./views/profiles.js";
import { query } from "./views/query.js";
import { trends } from "./views/trends.js";

export const views = { datasets: datasetsView, query, heatmap: heatmapView, investigate, compare, trends, changes, profiles };

// The workspace list: create a workspace (you become its admin), then open its memory.

import { announce, api, byId, config, failure, leaveTo, submitOnce } from "./shared.js";

function setUpWorkspaceCreate() {
  const form = byId("workspace-create");
  const status = byId("workspace-create-status");
  submitOnce(form, async () => {
    const name = form.elements.name.value.trim();
    const result = await api("POST", config.urls.workspaces, { body: { name } });
    if (!result.ok) {
      announce(status, failure("Not created", result), "error");
      return;
    }
    return leaveTo(config.urls.frame.replace("/0/", `/${result.data.id}/`));
  });
}

if (byId("workspace-create")) setUpWorkspaceCreate();

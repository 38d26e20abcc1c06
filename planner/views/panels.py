"""The plan page's side panel: which device holds what, and why.

A click on a tensor of the graph opens its panel: the device grid of its layout
(:func:`planner.views.svg_grid.device_grid_svg`, the picture ``describe --format svg``
draws), its global and local shape, dtype, bytes per device, and the chain of decisions
``shardplan explain`` prints (:meth:`~planner.report.Plan.explain`). A click on an op opens
its strategy, the cost of each of its candidate strategies (seed 002's table,
:meth:`~planner.report.Plan.candidates`) and the redistributions of its operands and result.

Everything the panels show is computed here, in Python, into one JSON document embedded
in the page (``<script type="application/json" id="plan-data">``); the page's script only
lays it out, with ``textContent`` for every name (names are user input). The JSON is
escaped so that no text in it can end the script element (every ``<``, ``>`` and ``&``
is written ``\\u003c`` ...). Shared pieces are stored once: the device grids by picture,
the explanation lines in one table that each tensor indexes (a long chain of layers
repeats the same lines for every tensor it explains), and the candidate tables, which
identical layers share.
"""

from __future__ import annotations

import json

from costmodels.units import format_bytes, format_seconds
from graphs.dtypes import dtype_itemsize
from planner.errors import NotExpressibleError, PlanningError
from planner.views.sharding_styles import LayoutStyle
from planner.views.svg_grid import device_grid_svg

DATA_ID = "plan-data"


def _steps(steps) -> str:
    return ", ".join(f"{s.kind}{'{' + ','.join(map(str, s.axes)) + '}' if s.axes else ''}" for s in steps) or "none"


def panel_data(p, styles: dict[str, LayoutStyle]) -> dict:
    """What every panel of the page shows, as JSON-ready data (see the module docstring)."""
    lines: dict[str, int] = {}
    grids: dict[str, int] = {}
    grid_of: dict[tuple, tuple[int, str]] = {}  # (sharding, shape, dtype) -> (grid, note): drawn once
    producer: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    for c in p.program.computes():
        producer[c.op.output] = c.op.name
        for t in dict.fromkeys(c.op.inputs):
            readers.setdefault(t, []).append(c.op.name)

    tensors = {}
    for name, t in p.tensors.items():
        local = t.sharding.local_shape(t.shape)
        elements = 1
        for d in local:
            elements *= d
        drawn = (t.sharding, tuple(t.shape), t.dtype)
        if drawn not in grid_of:
            try:
                grid_of[drawn] = grids.setdefault(device_grid_svg(t.sharding, t.shape, t.dtype), len(grids)), ""
            except NotExpressibleError as e:
                grid_of[drawn] = -1, str(e)
        grid, note = grid_of[drawn]
        key = t.sharding.dims_text()
        tensors[name] = {
            "dtype": t.dtype, "shape": list(t.shape), "local_shape": list(local), "kind": t.kind,
            "layout": key, "sharding": str(t.sharding), "style": styles[key].encoding(),
            "bytes_per_device": elements * dtype_itemsize(t.dtype),
            "bytes": format_bytes(elements * dtype_itemsize(t.dtype), exact=True),
            "source": t.source, "producer": producer.get(name, ""), "readers": readers.get(name, []),
            "grid": grid, "grid_note": note,
            "explain": [lines.setdefault(line, len(lines)) for line in p.explain(name)],
        }

    moves: dict[str, list] = {}
    for r in p.redistributions:
        row = {"tensor": r.tensor, "phase": r.phase, "steps": _steps(r.steps),
               "bytes": format_bytes(r.bytes_per_device, exact=True), "time": format_seconds(r.time_s),
               "from": r.source.dims_text(), "to": r.destination.dims_text(), "free": r.bytes_per_device == 0}
        for reader in dict.fromkeys(r.readers):
            moves.setdefault(reader, []).append({"role": "operand", **row})
        if r.producer is not None and r.producer not in r.readers:
            moves.setdefault(r.producer, []).append({"role": "result", **row})

    ops = {}
    tables: dict[tuple, int] = {}  # a table of candidates -> its index: identical layers share theirs
    texts: dict[tuple, str] = {}  # a strategy's split counts -> its text
    for o in p.ops:
        try:
            found = p.candidates(o.name)
            rows = []
            for c in found:
                if c.strategy.splits not in texts:
                    texts[c.strategy.splits] = c.text
                rows.append((texts[c.strategy.splits], format_seconds(c.cost_s), format_bytes(c.memory_bytes)))
            candidates = tables.setdefault(tuple(rows), len(tables))
            chosen, note = next((c.index for c in found if c.chosen), -1), ""
        except PlanningError as e:  # an op the search did not choose among candidates (a manual region's)
            candidates, chosen, note = -1, -1, str(e)
        ops[o.name] = {
            "kind": o.kind, "strategy": o.strategy.text(), "result": o.result_sharding.dims_text(),
            "operands": [s.dims_text() for s in o.operand_shardings], "source": o.source, "reason": o.reason,
            "compute": format_seconds(o.compute_time_s), "communication": format_seconds(o.comm_time_s),
            "inputs": [], "output": "", "candidates": candidates, "chosen": chosen, "candidates_note": note,
            "redistributions": moves.get(o.name, []),
        }
    for c in p.program.computes():
        if c.op.name in ops:
            ops[c.op.name]["inputs"] = list(c.op.inputs)
            ops[c.op.name]["output"] = c.op.output
    return {"lines": list(lines), "grids": list(grids), "candidates": [list(map(list, t)) for t in tables],
            "tensors": tensors, "ops": ops}


def panel_script(data: dict) -> str:
    """``data`` as the page's JSON script element, escaped so that nothing in it ends the element.

    >>> panel_script({"name": "</script><b>&"})[47:-9]
    '{"name":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026"}'
    """
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{DATA_ID}">{text}</script>'


PANEL_HINT = ("Click a tensor for its device grid, shapes, bytes per device and why it is laid out so; "
              "click an op for its strategy, its candidates' costs and the redistributions of its operands.")

CSS = """
.graph-area{display:flex;gap:14px;align-items:flex-start}
.graph-area>.graph-box{flex:1 1 auto;min-width:0}
.graph-box svg.graph{display:block;margin:0 auto}
svg.graph g.node{cursor:pointer}svg.graph g.node.selected rect.fill,svg.graph g.node.selected>rect{stroke:#111;
stroke-width:3}
aside.panel{flex:0 0 440px;max-height:85vh;overflow:auto;position:sticky;top:8px;border:1px solid #ddd;
padding:6px 12px 12px;font-size:13px;background:#fcfcfc;box-sizing:border-box}
aside.panel h3{font-size:14px;margin:6px 0;word-break:break-all}aside.panel h4{font-size:13px;margin:10px 0 4px}
aside.panel table{margin:4px 0}aside.panel th{position:static;background:none;font-weight:600;padding-right:10px}
aside.panel td{white-space:pre-wrap;overflow-wrap:anywhere}
aside.panel tr.chosen td{font-weight:700;background:#eef6ee}
.panel-grid svg{max-width:100%;height:auto}
.panel-explain{white-space:pre-wrap;word-break:break-all;font-size:11px;background:#f4f4f4;padding:6px;margin:0}
.panel-hint{color:#666}
.link{color:#1a55b0;cursor:pointer;text-decoration:underline}
.filters{font-size:13px;margin:4px 0}
body.hide-free .free{display:none}
body.hide-free svg.graph path.edge.free{display:inline;stroke-dasharray:none;stroke:#888888;stroke-width:1}
"""

JS = """
(function(){
  var blob=document.getElementById('plan-data'),panel=document.getElementById('panel');
  if(!blob||!panel){return;}
  var data=JSON.parse(blob.textContent);
  function el(tag,cls,text){var e=document.createElement(tag);if(cls){e.className=cls;}
    if(text!==undefined){e.textContent=text;}return e;}
  function shape(s){return '['+s.join(',')+']';}
  function facts(rows){var t=el('table','panel-facts');rows.forEach(function(r){var tr=el('tr');
    tr.appendChild(el('th','',r[0]));tr.appendChild(el('td',r[2]||'',r[1]));t.appendChild(tr);});return t;}
  function table(cls,head,rows,rowCls){var t=el('table',cls),h=el('tr');
    head.forEach(function(c){h.appendChild(el('th','',c));});t.appendChild(h);
    rows.forEach(function(r,i){var tr=el('tr',rowCls?rowCls(i):'');r.forEach(function(c){
      var td=el('td');if(c instanceof Node){td.appendChild(c);}else{td.textContent=c;}tr.appendChild(td);});
      t.appendChild(tr);});return t;}
  function link(kind,name){var a=el('span','link',name);a.setAttribute('data-'+kind,name);
    a.addEventListener('click',function(){show(kind,name);});return a;}
  function select(kind,name){
    document.querySelectorAll('svg.graph g.node.selected').forEach(function(g){g.classList.remove('selected');});
    document.querySelectorAll('svg.graph g.node.'+(kind==='tensor'?'tensor':'op')).forEach(function(g){
      if(g.getAttribute('data-'+kind)===name){g.classList.add('selected');}});
    while(panel.firstChild){panel.removeChild(panel.firstChild);}
    panel.setAttribute('data-kind',kind);panel.setAttribute('data-name',name);
  }
  function showTensor(name){
    var t=data.tensors[name];if(!t){return;}select('tensor',name);
    panel.appendChild(el('h3','panel-title','tensor '+name));
    panel.appendChild(facts([['layout',t.sharding,'panel-layout'],
      ['global shape',t.dtype+shape(t.shape),'panel-global'],['local shape',t.dtype+shape(t.local_shape),'panel-local'],
      ['dtype',t.dtype,'panel-dtype'],['bytes per device',t.bytes,'panel-bytes'],['kind',t.kind],
      ['decided',t.source]]));
    var io=el('p');
    if(t.producer){io.appendChild(document.createTextNode('made by '));io.appendChild(link('op',t.producer));
      io.appendChild(document.createTextNode(' '));}
    if(t.readers.length){io.appendChild(document.createTextNode('read by '));
      t.readers.forEach(function(r,i){if(i){io.appendChild(document.createTextNode(', '));}
        io.appendChild(link('op',r));});}
    panel.appendChild(io);
    panel.appendChild(el('h4','','which device holds what'));
    var g=el('div','panel-grid');
    if(t.grid>=0){g.innerHTML=data.grids[t.grid];}else{g.textContent=t.grid_note;}
    panel.appendChild(g);
    panel.appendChild(el('h4','','why (shardplan explain)'));
    panel.appendChild(el('pre','panel-explain',t.explain.map(function(i){return data.lines[i];}).join('\\n')));
  }
  function showOp(name){
    var o=data.ops[name];if(!o){return;}select('op',name);
    panel.appendChild(el('h3','panel-title','op '+name+' ('+o.kind+')'));
    panel.appendChild(facts([['strategy',o.strategy,'panel-strategy'],['operands',o.operands.join('  '),''],
      ['result',o.result,'panel-result'],['decided',o.source],['compute',o.compute],
      ['communication',o.communication]]));
    var io=el('p');io.appendChild(document.createTextNode('reads '));
    o.inputs.forEach(function(t,i){if(i){io.appendChild(document.createTextNode(', '));}
      io.appendChild(link('tensor',t));});
    if(o.output){io.appendChild(document.createTextNode('; makes '));io.appendChild(link('tensor',o.output));}
    panel.appendChild(io);
    panel.appendChild(el('h4','','candidate strategies and their own cost'));
    if(o.candidates>=0){
      var rows=data.candidates[o.candidates];
      panel.appendChild(table('panel-candidates',['strategy','cost','memory',''],rows.map(function(c,i){
        return [c[0],c[1],c[2],i===o.chosen?'chosen':''];}),function(i){return i===o.chosen?'chosen':'';}));
    }else{panel.appendChild(el('p','panel-hint',o.candidates_note));}
    panel.appendChild(el('h4','','redistributions of its operands and result'));
    if(o.redistributions.length){
      panel.appendChild(table('panel-reshards',['tensor','move','bytes/device','time'],
        o.redistributions.map(function(r){return [link('tensor',r.tensor),
          r.role+', '+r.phase+': '+r.steps+'\\n'+r.from+' → '+r.to,r.bytes,r.time];}),
        function(i){return o.redistributions[i].free?'free':'';}));
    }else{panel.appendChild(el('p','panel-hint','none: every operand arrives as this strategy reads it'));}
  }
  function show(kind,name){if(kind==='tensor'){showTensor(name);}else{showOp(name);}}
  document.querySelectorAll('svg.graph g.node').forEach(function(g){
    var kind=g.classList.contains('tensor')?'tensor':'op';
    function open(){show(kind,g.getAttribute('data-'+kind));}
    g.addEventListener('click',open);
    g.addEventListener('keydown',function(e){if(e.key==='Enter'){open();}});});
  var box=document.getElementById('hide-free');
  if(box){box.addEventListener('change',function(){document.body.classList.toggle('hide-free',box.checked);});}
})();
"""

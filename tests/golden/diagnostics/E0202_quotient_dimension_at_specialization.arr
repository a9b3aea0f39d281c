# arrc: lower attend f32[5,64] f32[7]
def attend(x: f32[t, dm], heads: f32[h]) -> f32[h, t, dm // h]:
    return transpose(reshape(x, (t, h, dm // h)), (1, 0, 2))
